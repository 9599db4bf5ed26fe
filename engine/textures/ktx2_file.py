"""The KTX2 texture file object: how its levels' bytes are read (one contiguous block per
level, inflated when supercompressed). Apart from the parser (ktx2.py) so that the Basis
Universal file (basis.py), a kind of it, and the parser that hands Basis payloads to it do
not import each other.
"""
from __future__ import annotations

from collections.abc import Sequence

from .container import Level, TextureFile
from .supercompression import inflate_zlib, inflate_zstd


class Ktx2File(TextureFile):
    """A KTX2 file: each level is one contiguous block holding every layer and face."""

    def _read_all(self, lv: Level) -> bytes:
        raw = self._read_span(lv.offset, lv.stored_nbytes, f"level {lv.index}")
        what = f"level {lv.index}"
        if self.supercompression == "zstd":
            return inflate_zstd(self.path, raw, lv.nbytes, what)
        if self.supercompression == "zlib":
            return inflate_zlib(self.path, raw, lv.nbytes, what)
        return raw

    def _plain_levels(self) -> bool:
        """Whether a level's bytes are its span of the file as stored (no inflation)."""
        return self.supercompression == "none"

    def read_levels_all(self, levels: Sequence[int]) -> dict[int, bytes]:
        """Adjacent plain levels (KTX2 stores the smallest first, so a mip tail is one run)
        in one open and one read: registering 10,000 textures otherwise opened each file
        once per tail level."""
        lvs = [self.level(i) for i in levels]
        if not lvs or not self._plain_levels():
            return super().read_levels_all(levels)
        start = min(lv.offset for lv in lvs)
        end = max(lv.offset + lv.nbytes for lv in lvs)
        if end - start > sum(lv.nbytes for lv in lvs) + 16 * len(lvs):  # not one run
            return super().read_levels_all(levels)
        span = self._read_span(start, end - start, f"levels {min(levels)}..{max(levels)}")
        return {lv.index: span[lv.offset - start:lv.offset - start + lv.nbytes] for lv in lvs}

    def _read_image(self, lv: Level, layer: int, face: int) -> bytes:
        start = (layer * self.faces + face) * lv.image_nbytes
        if self.supercompression != "none":
            return self._read_all(lv)[start:start + lv.image_nbytes]
        return self._read_span(lv.offset + start, lv.image_nbytes, f"level {lv.index}")
