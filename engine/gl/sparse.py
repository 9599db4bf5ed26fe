"""ARB_sparse_texture: one texture with the whole chain's address space, whose levels are
committed and decommitted in place (no reallocation, no copy, no old + new transient).

Memory is committed in pages (64 KiB on every implementation the extension allows, of
`VIRTUAL_PAGE_SIZE_X/Y` texels); levels at or past NUM_SPARSE_LEVELS form the mip tail,
committed as one unit. The ledger counts committed pages, so its figure is what the driver
really backs: level bytes rounded up to whole pages.
"""
from __future__ import annotations

import ctypes as C
from dataclasses import dataclass, field

from ..errors import GLError, GLOutOfMemoryError
from ..formats import PixelFormat
from ..memory.sizes import level_bytes, mip_dims
from . import constants as K
from .swizzle import format_swizzle, set_bound_swizzle
from .textures import GpuTexture
from ..memory.ledger import Category

PAGE_BYTES = 65536


@dataclass
class SparseLayout:
    """Page geometry of one format, and the committed bytes of each level of a chain."""

    page_w: int
    page_h: int
    num_sparse_levels: int
    level_commit_bytes: list[int] = field(default_factory=list)
    tail_bytes: int = 0

    def bytes_from(self, base: int) -> int:
        """Committed bytes when levels base.. are resident (the tail always is)."""
        sparse = sum(self.level_commit_bytes[base:self.num_sparse_levels])
        return sparse + self.tail_bytes


def page_size(device, fmt: PixelFormat) -> tuple[int, int]:
    x, y = C.c_int(0), C.c_int(0)
    device._raw.glGetInternalformativ(K.TEXTURE_2D, fmt.gl_internal, K.VIRTUAL_PAGE_SIZE_X_ARB,
                                     1, C.byref(x))
    device._raw.glGetInternalformativ(K.TEXTURE_2D, fmt.gl_internal, K.VIRTUAL_PAGE_SIZE_Y_ARB,
                                     1, C.byref(y))
    device.check_errors(f"sparse page size of {fmt.name}")
    return max(1, x.value), max(1, y.value)


def layout(fmt: PixelFormat, width: int, height: int, levels: int, page: tuple[int, int],
           num_sparse_levels: int) -> SparseLayout:
    pw, ph = page
    lay = SparseLayout(pw, ph, min(num_sparse_levels, levels))
    for lvl in range(levels):
        w, h = mip_dims(width, height, lvl)
        if lvl < lay.num_sparse_levels:
            lay.level_commit_bytes.append(-(-w // pw) * -(-h // ph) * PAGE_BYTES)
        else:
            lay.tail_bytes += level_bytes(fmt, w, h)
    if lay.tail_bytes:
        lay.tail_bytes = -(-lay.tail_bytes // PAGE_BYTES) * PAGE_BYTES
    return lay


def sparse_texture(device, fmt: PixelFormat, width: int, height: int, levels: int, *,
                   category: Category = Category.STREAMED, label: str = "sparse"
                   ) -> tuple[GpuTexture, SparseLayout]:
    """A 2D sparse texture with nothing committed yet (ledgered at 0 bytes)."""
    raw = device._raw
    page = page_size(device, fmt)

    def make() -> int:
        glo = raw.gen_texture()
        raw.glBindTexture(K.TEXTURE_2D, glo)
        raw.glTexParameteri(K.TEXTURE_2D, K.TEXTURE_SPARSE_ARB, 1)
        raw.glTexParameteri(K.TEXTURE_2D, K.VIRTUAL_PAGE_SIZE_INDEX_ARB, 0)
        raw.glTexStorage2D(K.TEXTURE_2D, levels, fmt.gl_internal, width, height)
        if format_swizzle(fmt):
            set_bound_swizzle(raw, K.TEXTURE_2D, format_swizzle(fmt))
        raw.glTexParameteri(K.TEXTURE_2D, K.TEXTURE_MIN_FILTER, K.LINEAR_MIPMAP_LINEAR)
        raw.glTexParameteri(K.TEXTURE_2D, K.TEXTURE_MAG_FILTER, K.LINEAR)
        raw.glBindTexture(K.TEXTURE_2D, 0)
        return glo

    glo = device._alloc.guarded(f"sparse {fmt.name} '{label}'", 0, make, raw.delete_texture)
    raw.glBindTexture(K.TEXTURE_2D, glo)
    n = C.c_int(0)
    raw.glGetTexParameteriv(K.TEXTURE_2D, K.NUM_SPARSE_LEVELS_ARB, C.byref(n))
    raw.glBindTexture(K.TEXTURE_2D, 0)
    tex = GpuTexture(glo, K.TEXTURE_2D, fmt, width, height, 0, levels, 1, 1, 0, label,
                     category, device)
    device._alloc.register(tex, "texture", category, label, 0, glo, lambda: raw.delete_texture(glo))
    return tex, layout(fmt, width, height, levels, page, n.value)


def commit(device, tex: GpuTexture, lay: SparseLayout, level: int, on: bool) -> None:
    """Commit (or decommit) one level's pages, or the whole tail for a tail level; the
    ledger follows. On GL_OUT_OF_MEMORY the commit is undone before the error is raised."""
    w, h = mip_dims(tex.chain_width, tex.chain_height, level)
    raw = device._raw
    raw.glBindTexture(K.TEXTURE_2D, tex.glo)
    raw.glTexPageCommitmentARB(K.TEXTURE_2D, level, 0, 0, 0, w, h, 1, 1 if on else 0)
    raw.glBindTexture(K.TEXTURE_2D, 0)
    codes = device._alloc.drain_errors()
    if codes:
        if on:
            commit(device, tex, lay, level, False)
        delta = lay.level_commit_bytes[level] if level < lay.num_sparse_levels else lay.tail_bytes
        if K.OUT_OF_MEMORY in codes:
            raise GLOutOfMemoryError(f"commit of level {level} of '{tex.label}'", delta)
        raise GLError(f"page commitment of level {level} of '{tex.label}'", tuple(codes))
