"""`inspect(path)`: a JSON-able summary of a texture file's header, for the CLI and bug reports."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .container import TextureFile
from .reader import open_texture


def describe(tex: TextureFile) -> dict[str, Any]:
    """Header facts of an opened texture as plain JSON types (no pixel data is read)."""
    return {
        "path": str(tex.path),
        "container": tex.container,
        "format": tex.format,
        "width": tex.width,
        "height": tex.height,
        "depth": tex.depth,
        "layers": tex.layers,
        "faces": tex.faces,
        "is_array": tex.is_array,
        "is_cube": tex.is_cube,
        "supercompression": tex.supercompression,
        "file_bytes": tex.file_size,
        "levels": [{"index": lv.index, "width": lv.width, "height": lv.height, "depth": lv.depth,
                    "offset": lv.offset, "stored_bytes": lv.stored_nbytes,
                    "uncompressed_bytes": lv.nbytes} for lv in tex.levels],
        **tex.extra,
    }


def inspect(path: str | Path) -> dict[str, Any]:
    """Open `path` (header only) and describe it."""
    return describe(open_texture(path))
