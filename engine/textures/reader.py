"""`open_texture`: pick the reader from the file's magic bytes, not its extension."""
from __future__ import annotations

from pathlib import Path

from ..errors import TextureFormatError
from .container import TextureFile, read_prefix
from .dds import MAGIC as DDS_MAGIC
from .dds import open_dds
from .ktx2 import IDENTIFIER as KTX2_IDENTIFIER
from .ktx2 import open_ktx2

_KTX1_IDENTIFIER = b"\xabKTX 11\xbb\r\n\x1a\n"


def open_texture(path: str | Path) -> TextureFile:
    """Read the header and level index of a KTX2 or DDS file (no level bytes)."""
    path = Path(path)
    magic = read_prefix(path, 12)
    if magic == KTX2_IDENTIFIER:
        return open_ktx2(path)
    if magic[:4] == DDS_MAGIC:
        return open_dds(path)
    if magic == _KTX1_IDENTIFIER:
        raise TextureFormatError(path, "identifier: KTX 1.1 file (only KTX 2.0 is read)")
    raise TextureFormatError(path, "identifier: neither KTX2 nor DDS")
