"""The GL side of the VRAM probe: NVX_gpu_memory_info, then ATI_meminfo, then nothing.

Render thread only (it calls GL). The reading it returns is `engine.memory.probe.VramReading`;
the governor, not this module, decides what a reading means for the budget.
"""
from __future__ import annotations

import logging

from ..memory.probe import VramReading, sane
from . import constants as K

log = logging.getLogger(__name__)

_KIB = 1024


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
