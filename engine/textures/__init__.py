"""Texture files: header-only open, single-level reads, CPU decode to RGBA8.

    tex = engine.textures.open("rock.ktx2")      # header + level index only
    data = tex.read_level(2)                       # bytes of mip 2 (layer 0, face 0)
    rgba = engine.textures.decode_rgba(tex, 2)     # (H, W, 4) uint8, what the GPU samples

Every malformed input raises `engine.errors.TextureFormatError`; well-formed payloads the
engine cannot use raise its subclass `UnsupportedFormatError`.
"""
from __future__ import annotations

from .container import MAX_DEPTH, MAX_DIMENSION, MAX_LAYERS, Level, TextureFile
from .decode import decode_rgba
from .inspect import describe, inspect
from .reader import open_texture

# The public name; it shadows the builtin only inside this package's namespace.
open = open_texture

__all__ = ["MAX_DEPTH", "MAX_DIMENSION", "MAX_LAYERS", "Level", "TextureFile", "decode_rgba",
           "describe", "inspect", "open", "open_texture"]
