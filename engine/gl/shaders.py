"""Load GLSL sources from the `engine.shaders` package data, with a minimal #include.

The sources are the repository's top-level shaders/ folder, installed inside the package (see
setup.py), and read with importlib.resources so a wheel, an editable install and a checkout all
find them.
"""
from __future__ import annotations

import re
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)


@cache
def load(name: str) -> str:
    """Source of shaders/<name> with each `#include "file"` line replaced by that file
    (an include inside an include is expanded too)."""
    path = resources.files("engine.shaders").joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"shader {name!r} not found in the engine.shaders package")
    return _INCLUDE.sub(lambda m: load(m.group(1)), path.read_text(encoding="utf-8"))
