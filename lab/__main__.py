"""`python -m lab ...`: see lab.cli."""
from engine.cli import entry_point

from .cli import LAB

entry_point(LAB)
