"""`python -m engine ...`: see engine.cli."""
import sys

from .cli import main

sys.exit(main())
