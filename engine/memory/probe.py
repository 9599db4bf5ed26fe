"""What a driver or NVML says about VRAM, as plain data, and the sanity rule for it.

The ledger is our own exact count; a VRAM reading is the outside view used as a cross-check
and to notice memory taken by *other* programs (the governor lowers the effective budget).
The GL queries that produce readings live in `engine.gl.probe` (they need the context); this
module only holds the reading and judges it, so the governor can use it without GL.
Software drivers sometimes answer memory queries with placeholders, and a wrong total is worse
than none.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

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
