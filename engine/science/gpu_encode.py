"""BC4 slots of scientific tiles encoded by a compute shader (shaders/science_bc4_encode.comp
.glsl), from the tile's raw values, into the cache's page texture without a trip through the
CPU.

Why: encoding in numpy on the reader threads is a few dozen short numpy calls a tile, each
taking and leaving the GIL, so four readers encode no faster than one and a zoom waits on
them (docs/benchmarks.md). Here a tile costs the main thread what an exact upload costs (its
values written to a staging texture) plus a dispatch and a buffer-to-texture copy; the
bytes are those of `engine.science.bc4.encode_tile`. A ring of staging places lets the next
tile's write go ahead while the GPU still reads the last one's.
"""
from __future__ import annotations

import numpy as np

from ..gl.constants import NEAREST
from ..gl.device import Device
from ..gl.shaders import load as load_shader
from ..gl.vt import PageCache
from ..memory.ledger import Category
from .bc4 import BLOCK, BLOCK_BYTES, pitch_for, tile_range
from .gpu import GL_DTYPES

#: staging places a frame's uploads cycle through
RING = 4
_GROUP = 64  # local_size_x of the shader


class GpuTileEncoder:
    """Staging for RING tiles of `dtype` values and their blocks, and the program."""

    def __init__(self, device: Device, dtype: np.dtype, tile: int) -> None:
        self.device = device
        self.dtype = np.dtype(dtype)
        self.pitch = pitch_for(tile)
        self.blocks_x = self.pitch // BLOCK
        self.slot_bytes = self.blocks_x * self.blocks_x * BLOCK_BYTES
        code, sampler = GL_DTYPES[self.dtype.name]
        source = load_shader("science_bc4_encode.comp.glsl").replace(
            "#define VALUE_SAMPLER usampler2D", f"#define VALUE_SAMPLER {sampler}")
        self.program = device.shared_compute_shader(source,
                                                    label=f"science.bc4-encode.{sampler}")
        self.values = device.texture((self.pitch, self.pitch * RING), 1, dtype=code,
                                     category=Category.STAGING, label="science.encode.values")
        self.values.filter = (NEAREST, NEAREST)
        try:
            self.blocks = device.buffer(reserve=RING * self.slot_bytes,
                                        category=Category.STAGING,
                                        label="science.encode.blocks")
        except BaseException:
            device.release(self.values)
            raise
        self._next = 0

    def encode_into(self, pages: PageCache, slot: int, values: np.ndarray) -> tuple[float, float]:
        """Encode one tile (edge tiles smaller than a slot) into `pages`' slot; its (low,
        span)."""
        h, w = values.shape
        low, span = tile_range(values)
        place, self._next = self._next, (self._next + 1) % RING
        data = np.ascontiguousarray(values, self.dtype)
        self.values.write(data.tobytes(), viewport=(0, place * self.pitch, w, h), alignment=1)
        prog = self.program
        uniforms = {"origin": (0, place * self.pitch), "size": (w, h),
                    "blocks_x": self.blocks_x, "out_base": place * self.blocks_x ** 2,
                    "low": float(np.float32(low)), "scale": float(np.float32(255.0 / span)),
                    "src": 0}
        for name, value in uniforms.items():
            prog[name].value = value
        self.values.use(0)
        self.blocks.bind_to_storage_buffer(0)
        prog.run((self.blocks_x ** 2 + _GROUP - 1) // _GROUP)
        self.device.storage_barrier()
        pages.upload_tile_from_buffer(slot, self.blocks.glo, place * self.slot_bytes)
        return low, span

    def release(self) -> None:
        self.device.release(self.blocks)
        self.device.release(self.values)
