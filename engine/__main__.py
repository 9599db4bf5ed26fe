"""`python -m engine ...`: see engine.cli."""
from .cli import entry_point

entry_point()
