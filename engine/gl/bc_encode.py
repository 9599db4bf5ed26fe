"""BC1 and BC7 blocks encoded by compute shaders, in bands that fit a per-call time budget.

Why on the GPU: a render thread that waits for full detail has a GPU beside it; encoding
there keeps the CPU cores for decoding. The shaders (shaders/bc1_encode.comp.glsl,
shaders/bc7_encode.comp.glsl) encode one 4x4 block per invocation from an RGBA8 texture
(texelFetch: the texels exactly, edges padded by repetition) into a storage buffer that is
read back or copied straight into a compressed texture. BC1 fits endpoints along the block's
principal axis with least-squares refits (BC1 with 1-bit alpha switches blocks with
transparent texels to 3-colour mode); BC7 writes mode 6 (one RGBA subset, p-bits, 4-bit
indices) and, for opaque blocks, mode 1 (two RGB subsets of the best-fitting of its 64
partitions) where that decodes closer; opaque blocks decode alpha 255 in both.

A job (`EncodeJob`) covers a whole mip chain. `step(budget_s)` dispatches bands of blocks
until the budget is spent, sized by engine.textures.bands from the rate of the bands before,
and waits for each (the time it reports is the GPU's own); `run()` does everything at once.
Each block is independent, so any banding gives the same bytes. The source texture, the
output buffer and the programs go through the device: ledgered, leak-tracked, released by
`release()`.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from ..formats import get as get_format
from ..memory.ledger import Category
from ..memory.sizes import mip_count, mip_dims
from ..textures.bands import BandPlanner, blocks_of, split
from .device import Device
from .shaders import load as load_shader
from .textures import GpuTexture

log = logging.getLogger(__name__)

#: Formats the compute encoder writes, and the shader and block size of each family.
GPU_ENCODABLE = ("BC1_RGB", "BC1_RGB_SRGB", "BC1_RGBA", "BC1_RGBA_SRGB", "BC7", "BC7_SRGB")
_SHADERS = {"BC1": ("bc1_encode.comp.glsl", 8), "BC7": ("bc7_encode.comp.glsl", 16)}
_GROUP = 64  # local_size_x of the shaders
_MAX_GROUPS = 65535  # the least GL_MAX_COMPUTE_WORK_GROUP_COUNT[0] GL 4.3 guarantees


@dataclass(frozen=True)
class _Level:
    width: int
    height: int
    blocks_x: int
    blocks: int
    base: int  # first block of the level in the output buffer


def _check_format(fmt: str) -> Any:
    f = get_format(fmt) if isinstance(fmt, str) else fmt
    if f.name not in GPU_ENCODABLE:
        raise UsageError(f"the GPU encoder writes {', '.join(GPU_ENCODABLE)}, not {f.name}")
    return f


def _check_image(rgba: Any, what: str) -> np.ndarray:
    if not isinstance(rgba, np.ndarray) or rgba.ndim != 3 or rgba.shape[2] != 4 \
            or rgba.dtype != np.uint8:
        shape = getattr(rgba, "shape", None)
        raise UsageError(f"{what}: expected an (H, W, 4) uint8 RGBA image, got "
                         f"{shape} {getattr(rgba, 'dtype', type(rgba).__name__)}")
    if rgba.shape[0] < 1 or rgba.shape[1] < 1:
        raise UsageError(f"{what}: an image of {rgba.shape[1]}x{rgba.shape[0]} has no texels")
    return np.ascontiguousarray(rgba)


class GpuBlockEncoder:
    """The compute programs, made once per format family and kept until `release()`."""

    def __init__(self, device: Device) -> None:
        if not device.profile.compute:
            raise UsageError(f"the GPU encoder needs GL 4.3 compute shaders; this context is "
                             f"GL {device.caps.gl_version}")
        self.device = device
        self._programs: dict[str, Any] = {}

    def program(self, family: str) -> Any:
        prog = self._programs.get(family)
        if prog is None:
            prog = self.device.compute_shader(load_shader(_SHADERS[family][0]),
                                              label=f"{family.lower()}-encode")
            self._programs[family] = prog
        return prog

    # ------------------------------------------------------------------ starting jobs
    def _source(self, width: int, height: int, levels: int, data: bytes | None,
                srgb: bool) -> Any:
        limit = self.device.caps.max_texture_size
        if width > limit or height > limit:
            raise UsageError(f"a {width}x{height} image exceeds this GPU's texture limit "
                             f"{limit}: encode it in strips of at most {limit} texels a side")
        return self.device.texture((width, height), 4, data, levels=levels,
                                   category=Category.STAGING, label="encode-source", srgb=srgb)

    def start(self, levels: Sequence[np.ndarray], fmt: str) -> EncodeJob:
        """A job encoding a given mip chain (level 0 first; each level the mip size of the
        one before, as engine.textures.mipgen makes them)."""
        f = _check_format(fmt)
        if not levels:
            raise UsageError("no levels to encode")
        chain = [_check_image(img, f"level {i}") for i, img in enumerate(levels)]
        h0, w0 = chain[0].shape[:2]
        if len(chain) > mip_count(w0, h0):
            raise UsageError(f"{len(chain)} levels for a {w0}x{h0} image, which has "
                             f"{mip_count(w0, h0)}")
        for i, img in enumerate(chain[1:], 1):
            if (img.shape[1], img.shape[0]) != mip_dims(w0, h0, i):
                raise UsageError(f"level {i} is {img.shape[1]}x{img.shape[0]}; a {w0}x{h0} "
                                 f"chain's level {i} is {'x'.join(map(str, mip_dims(w0, h0, i)))}")
        tex = self._source(w0, h0, len(chain), chain[0].tobytes(), srgb=False)
        for i, img in enumerate(chain[1:], 1):
            tex.write(img.tobytes(), level=i)
        return EncodeJob(self, tex, f, len(chain), srgb_source=False, owns_source=True)

    def start_mipmapped(self, rgba: np.ndarray, fmt: str) -> EncodeJob:
        """A job encoding `rgba` and its whole mip chain made on the GPU (glGenerateMipmap;
        for sRGB formats on an sRGB texture, so the filtering is in linear light)."""
        f = _check_format(fmt)
        img = _check_image(rgba, "image")
        h, w = img.shape[:2]
        levels = mip_count(w, h)
        tex = self._source(w, h, levels, img.tobytes(), srgb=f.srgb)
        return EncodeJob(self, tex, f, levels, srgb_source=f.srgb, owns_source=True)

    def start_texture(self, texture: Any, fmt: str, levels: int = 1) -> EncodeJob:
        """A job encoding the first `levels` levels of an RGBA8 texture the caller owns (and
        keeps alive until the job is released)."""
        f = _check_format(fmt)
        if getattr(texture, "components", 4) != 4 or getattr(texture, "dtype", "f1") != "f1":
            raise UsageError("the GPU encoder reads RGBA8 textures")
        w, h = texture.size
        if not 1 <= levels <= mip_count(w, h):
            raise UsageError(f"{levels} levels of a {w}x{h} texture")
        return EncodeJob(self, texture, f, levels, srgb_source=False, owns_source=False)

    # ------------------------------------------------------------------ one shot
    def encode(self, rgba: np.ndarray, fmt: str) -> bytes:
        """One image's blocks (what engine.textures.encode.encode_image returns for it)."""
        return self.encode_chain([rgba], fmt)[0]

    def encode_chain(self, levels: Sequence[np.ndarray], fmt: str) -> list[bytes]:
        return self._finish(self.start(levels, fmt))

    def encode_mipmapped(self, rgba: np.ndarray, fmt: str) -> list[bytes]:
        """The blocks of every level of `rgba`'s chain, its mips made on the GPU."""
        return self._finish(self.start_mipmapped(rgba, fmt))

    @staticmethod
    def _finish(job: EncodeJob) -> list[bytes]:
        try:
            job.run()
            return job.result()
        finally:
            job.release()

    def release(self) -> None:
        for prog in self._programs.values():
            self.device.release(prog)
        self._programs.clear()


class EncodeJob:
    """One chain being encoded, band by band (see module)."""

    def __init__(self, encoder: GpuBlockEncoder, source: Any, fmt: Any, levels: int, *,
                 srgb_source: bool, owns_source: bool) -> None:
        self.encoder, self.device = encoder, encoder.device
        self.fmt = fmt
        self._source, self._owns_source, self._srgb = source, owns_source, srgb_source
        self.block_bytes = _SHADERS[fmt.family][1]
        w0, h0 = source.size
        self.levels: list[_Level] = []
        base = 0
        for i in range(levels):
            w, h = mip_dims(w0, h0, i)
            bx, by = blocks_of(w, h)
            self.levels.append(_Level(w, h, bx, bx * by, base))
            base += bx * by
        self.total_blocks = base
        self.planner = BandPlanner()
        self._cursor = (0, 0)
        self.done_blocks = 0
        self.dispatches = 0
        self._program = encoder.program(fmt.family)
        self._out = self.device.buffer(reserve=base * self.block_bytes,
                                       category=Category.STAGING, label="encode-blocks")

    @property
    def done(self) -> bool:
        return self.done_blocks >= self.total_blocks

    def _dispatch(self, level: int, first: int, count: int) -> None:
        lv = self.levels[level]
        prog = self._program
        values = {"level": level, "size": (lv.width, lv.height), "blocks_x": lv.blocks_x,
                  "first_block": first, "block_count": count, "out_base": lv.base,
                  "srgb_source": int(self._srgb), "punch": int(self.fmt.components == 4),
                  "src": 0}
        for name, value in values.items():
            if name in prog:  # the compiler drops uniforms a shader does not use
                prog[name].value = value
        self._source.use(0)
        self._out.bind_to_storage_buffer(0)
        prog.run((count + _GROUP - 1) // _GROUP)
        self.dispatches += 1

    def _band(self, count: int) -> int:
        """Dispatch `count` blocks from the cursor; returns how many were dispatched."""
        done = 0
        for seg in split([lv.blocks for lv in self.levels], self._cursor, count):
            for first in range(seg.first, seg.first + seg.count, _MAX_GROUPS * _GROUP):
                n = min(_MAX_GROUPS * _GROUP, seg.first + seg.count - first)
                self._dispatch(seg.level, first, n)
                done += n
            end = seg.first + seg.count
            self._cursor = (seg.level, end) if end < self.levels[seg.level].blocks \
                else (seg.level + 1, 0)
        self.done_blocks += done
        return done

    def step(self, budget_s: float) -> bool:
        """Encode bands until `budget_s` seconds are spent (at least one band, so every call
        makes progress); returns whether the job is done."""
        start = time.perf_counter()
        first = True
        while not self.done:
            left = budget_s - (time.perf_counter() - start)
            n = self.planner.band(left, self.total_blocks - self.done_blocks, first)
            if n == 0:
                break
            t0 = time.perf_counter()
            n = self._band(n)
            self.device.finish()
            self.planner.measured(n, time.perf_counter() - t0)
            first = False
        return self.done

    def run(self) -> None:
        """Encode everything that is left, with no budget."""
        while not self.done:
            self._band(self.total_blocks - self.done_blocks)
        self.device.finish()

    def _finished(self, what: str) -> None:
        if not self.done:
            raise UsageError(f"{what}: the job has {self.total_blocks - self.done_blocks} "
                             f"of {self.total_blocks} blocks still to encode")

    def result(self) -> list[bytes]:
        """Each level's blocks, read back (the job must be done)."""
        self._finished("result")
        self.device.storage_barrier()
        return [self._out.read(size=lv.blocks * self.block_bytes,
                               offset=lv.base * self.block_bytes) for lv in self.levels]

    def upload_into(self, texture: GpuTexture, first_chain_level: int = 0) -> None:
        """Copy the blocks straight into a compressed texture of this job's format, level i
        of the job into chain level first_chain_level + i, without a trip through the CPU."""
        self._finished("upload_into")
        if texture.fmt.name != self.fmt.name:
            raise UsageError(f"texture '{texture.label}' is {texture.fmt.name}, the job "
                             f"encodes {self.fmt.name}")
        self.device.storage_barrier()
        for i, lv in enumerate(self.levels):
            self.device.commands.upload_from_buffer(texture, first_chain_level + i, self._out.glo,
                                           lv.base * self.block_bytes,
                                           lv.blocks * self.block_bytes)

    def release(self) -> None:
        self.device.release(self._out)
        self._out = None
        if self._owns_source:
            self.device.release(self._source)
        self._source = None


@contextmanager
def chain_encoder() -> Iterator[Callable[[list[np.ndarray], str], list[bytes]]]:
    """A headless device and its encoder for the length of a bake: yields `encode_chain`
    (engine.textures.bake's ChainEncoder)."""
    device = Device.headless()
    try:
        enc = GpuBlockEncoder(device)
        try:
            yield enc.encode_chain
        finally:
            enc.release()
    finally:
        device.shutdown()
