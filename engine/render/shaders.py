"""Load GLSL sources from the repository's shaders/ folder, with a minimal #include.

The folder sits next to the package (engine/../shaders) so shader authors edit plain .glsl
files with their editor's GLSL support instead of Python strings.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SHADER_DIR = Path(__file__).resolve().parents[2] / "shaders"
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)


@cache
def load(name: str) -> str:
    """Source of shaders/<name> with each `#include "file"` line replaced by that file
    (one level deep is all the shaders need; an include inside an include is expanded too)."""
    path = SHADER_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"shader {name!r} not found in {SHADER_DIR}")
    return _INCLUDE.sub(lambda m: load(m.group(1)), path.read_text(encoding="utf-8"))
