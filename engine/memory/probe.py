"""What the driver says about VRAM: NVX_gpu_memory_info, then ATI_meminfo, then nothing.

The ledger is our own exact count; this probe is the outside view used as a cross-check
and to notice memory taken by *other* programs (the governor lowers the effective budget).
Values are sanity-checked: software drivers sometimes answer memory queries with
placeholders, and a wrong total is worse than none.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from ..gl import constants as K

log = logging.getLogger(__name__)

_KIB = 1024
_MAX_SANE = 1 << 50  # 1 PiB: anything above is nonsense


@dataclass(frozen=True)
class VramReading:
    """One probe reading; bytes. None where the source does not know."""

    source: str | None  # "NVX", "ATI", "NVML" or None
    total_bytes: int | None
    available_bytes: int | None
    evictions_total: int = 0
    evicted_bytes_total: int = 0

    def as_dict(self) -> dict:
        return {"source": self.source, "total_bytes": self.total_bytes,
                "available_bytes": self.available_bytes,
                "evictions_total": self.evictions_total,
                "evicted_bytes_total": self.evicted_bytes_total}


def sane(total: int | None, available: int | None) -> bool:
    """Reject readings no real GPU gives (zero or negative totals, available > total).
    A source that reports only free memory (ATI_meminfo) is judged by that figure."""
    if total is None:
        return available is not None and 0 < available < _MAX_SANE
    if total <= 0 or total > _MAX_SANE:
        return False
    if available is not None and (available < 0 or available > total * 1.05):
        return False
    return True


class VramProbe:
    """Reads the memory-info extension the driver has. Render thread only (it calls GL).

    NVX's eviction count and evicted memory reset at every read, so they are accumulated here.
    """

    def __init__(self, raw, extensions: set[str]) -> None:
        self._raw = raw
        self._evictions = 0
        self._evicted = 0
        self.source: str | None = None
        if "GL_NVX_gpu_memory_info" in extensions:
            self.source = "NVX"
        elif "GL_ATI_meminfo" in extensions:
            self.source = "ATI"
        if self.source is not None:
            first = self.read()
            if not sane(first.total_bytes, first.available_bytes):
                log.warning("%s memory info gave nonsense (total=%s available=%s); ignoring it",
                            self.source, first.total_bytes, first.available_bytes)
                self.source = None

    def read(self) -> VramReading:
        raw = self._raw
        if self.source == "NVX":
            total = raw.get_int(K.GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX) * _KIB
            avail = raw.get_int(K.GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX) * _KIB
            self._evictions += max(0, raw.get_int(K.GPU_MEMORY_INFO_EVICTION_COUNT_NVX))
            self._evicted += max(0, raw.get_int(K.GPU_MEMORY_INFO_EVICTED_MEMORY_NVX)) * _KIB
            return VramReading("NVX", total, avail, self._evictions, self._evicted)
        if self.source == "ATI":
            # ATI_meminfo: 4 ints [total free, largest free block, total aux free, largest aux]
            vals = raw.get_ints(K.TEXTURE_FREE_MEMORY_ATI, 4)
            return VramReading("ATI", None, vals[0] * _KIB)
        return VramReading(None, None, None)
