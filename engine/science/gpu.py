"""GL executor of the chunked-image view: the value cache, the LUT texture and the draw.

Why not the virtual-texture page cache (engine/gl/vt.py): it samples through the page table
with bilinear filtering and tile borders, all in one format per cache and normalised reads;
exact integer values need integer textures read with texelFetch (no filtering at all), and a
scientific view needs no page table, only a list of tile quads. So this is the smallest
cache that does that: one texture of square slots in the source's own format (R8UI, R16UI,
R32UI, R8I, R16I, R32I, R16F, R32F), made through the Device in the streamed category, so
the ledger and the governor count it with every other streamed byte.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .. import formats
from ..gl.device import Device
from ..gl.shaders import load as load_shader
from ..gl.constants import NEAREST
from ..gl.vt import PageCache, cache_grid
from ..memory.ledger import Category
from ..memory.sizes import level_bytes
from .bc4 import EncodedTile, pitch_for
from .colormaps import lut
from .display import ChannelDisplay

if TYPE_CHECKING:
    from .gpu_encode import GpuTileEncoder

log = logging.getLogger(__name__)

#: channels drawn at once (the shader's u_params array and the LUT texture's rows)
MAX_CHANNELS = 32
#: the source dtype -> (moderngl dtype of a one-component texture, GLSL sampler type)
GL_DTYPES = {"uint8": ("u1", "usampler2D"), "uint16": ("u2", "usampler2D"),
             "uint32": ("u4", "usampler2D"), "int8": ("i1", "isampler2D"),
             "int16": ("i2", "isampler2D"), "int32": ("i4", "isampler2D"),
             "float16": ("f2", "sampler2D"), "float32": ("f4", "sampler2D")}
#: a tile piece's instance: its level-0 rectangle x0, y0, x1, y1; the same in its level's
#: texels; shift to the slot x, y; the tile's first and last texel x0, y0, x1, y1; row; the
#: slot's map to values (low, span: BC4 only)
FLOATS_PER_QUAD = 17
#: how values are read: the nearest texel, or bilinear between four (float data only)
SAMPLING = ("nearest", "linear")
#: how tiles are kept: exact (the source's own format), or BC4 when the user asks for a
#: quarter of a 16-bit cache's bytes and accepts lossy values on screen (pick stays exact)
ENCODINGS = ("exact", "bc4")


def slot_bytes(dtype: np.dtype, tile: int, encoding: str = "exact") -> int:
    if encoding == "bc4":
        return level_bytes("BC4", pitch_for(tile), pitch_for(tile))
    return tile * tile * np.dtype(dtype).itemsize


def slot_grid(wanted: int, most: int, tile: int, max_texture_size: int) -> tuple[int, int]:
    """The most nearly square grid of at least `wanted` slots; where that is over `most`
    slots or the size limit, the grid of at most `most`. (A grid of at most `wanted` can
    come out a slot short of it, and a view that then finds its cache too small grows it.)"""
    across = max(1, max_texture_size // tile)
    sx = min(across, math.isqrt(max(1, wanted) - 1) + 1)
    sy = -(-wanted // sx)
    if sy <= across and sx * sy <= most:
        return sx, sy
    return cache_grid(most, tile, max_texture_size)


class _Slots:
    """A grid of at least `slots` square slots of `pitch` texels, and at most `most` (see
    slot_grid), with each slot's map back to values (low, span)."""

    def __init__(self, device: Device, pitch: int, slots: int, most: int) -> None:
        self.device = device
        self.pitch = int(pitch)
        self.slots_x, self.slots_y = slot_grid(slots, most, self.pitch,
                                               device.caps.max_texture_size)
        self.slots = self.slots_x * self.slots_y
        self.ranges = np.zeros((self.slots, 2), np.float32)
        self.ranges[:, 1] = 1.0
        self.uploads = 0

    def origin(self, slot: int) -> tuple[int, int]:
        return (slot % self.slots_x) * self.pitch, (slot // self.slots_x) * self.pitch


class ValueCache(_Slots):
    """Tiles of `tile` texels kept exactly: one texture in the source's own format."""

    def __init__(self, device: Device, dtype: np.dtype, tile: int, slots: int, most: int,
                 label: str = "science.tiles") -> None:
        super().__init__(device, tile, slots, most)
        self.dtype = np.dtype(dtype)
        self.tile = int(tile)
        code, _ = GL_DTYPES[self.dtype.name]
        self.tex = device.texture((self.slots_x * self.tile, self.slots_y * self.tile), 1,
                                  dtype=code, category=Category.STREAMED, label=label)
        self.tex.filter = (NEAREST, NEAREST)  # integer textures are incomplete otherwise

    @property
    def nbytes(self) -> int:
        return self.slots * slot_bytes(self.dtype, self.tile)

    def upload(self, slot: int, values: np.ndarray) -> None:
        """Write one tile (edge tiles smaller than a slot) at the slot's corner."""
        h, w = values.shape
        x, y = self.origin(slot)
        data = np.ascontiguousarray(values, self.dtype)
        self.tex.write(data.tobytes(), viewport=(x, y, w, h), alignment=1)
        self.uploads += 1

    def copy_slots(self, src: ValueCache, moves: list[tuple[int, int]]) -> None:
        """Copy tiles of `src` into this cache on the GPU, `moves` being (slot there, slot
        here): what lets the cache change size without reading the tiles it keeps again."""
        self.device.commands.copy_squares(
            src.tex, self.tex, [(src.origin(a), self.origin(b), self.tile) for a, b in moves])

    def release(self) -> None:
        self.device.release(self.tex)


class EncodedValueCache(_Slots):
    """Tiles of `tile` texels as BC4 (engine.science.bc4): a page cache of BC4 slots of
    whole blocks, each slot's low and span beside it. Tiles arrive encoded (on the reader
    threads), or as values that `encoder` encodes on the GPU."""

    def __init__(self, device: Device, tile: int, slots: int, most: int,
                 encoder: GpuTileEncoder | None = None, label: str = "science.tiles") -> None:
        super().__init__(device, pitch_for(tile), slots, most)
        self.encoder = encoder
        self.pages = PageCache(device, formats.get("BC4"), self.slots_x, self.slots_y,
                               self.pitch, label=label)
        self.tex = self.pages.tex

    @property
    def nbytes(self) -> int:
        return self.pages.nbytes

    def upload(self, slot: int, tile: EncodedTile | np.ndarray) -> None:
        if isinstance(tile, EncodedTile):
            self.pages.upload_tile(slot, tile.data)
            self.ranges[slot] = (tile.low, tile.span)
        else:
            self.ranges[slot] = self.encoder.encode_into(self.pages, slot, tile)
        self.uploads += 1

    def copy_slots(self, src: EncodedValueCache, moves: list[tuple[int, int]]) -> None:
        """As ValueCache.copy_slots, the slots' ranges with them."""
        self.pages.copy_slots(src.pages, moves)
        for a, b in moves:
            self.ranges[b] = src.ranges[a]

    def release(self) -> None:
        self.pages.release()


def value_cache(device: Device, dtype: np.dtype, tile: int, slots: int, most: int,
                encoding: str, encoder: GpuTileEncoder | None = None
                ) -> ValueCache | EncodedValueCache:
    """The cache a view's encoding keeps its tiles in."""
    if encoding == "bc4":
        return EncodedValueCache(device, tile, slots, most, encoder)
    return ValueCache(device, dtype, tile, slots, most)


class LutTexture:
    """The colormaps of the shown channels: row r is channel row r's 256 colours."""

    def __init__(self, device: Device, label: str = "science.luts") -> None:
        self.device = device
        self.tex = device.texture((256, MAX_CHANNELS), 4, category=Category.STATIC,
                                  label=label)
        self.tex.filter = (NEAREST, NEAREST)
        self._rows: list[str | None] = [None] * MAX_CHANNELS

    def set(self, row: int, colormap: str) -> None:
        """Write a row's table when its colormap changed (one 1 KiB write)."""
        if self._rows[row] == colormap:
            return
        rgba = np.full((256, 4), 255, np.uint8)
        rgba[:, :3] = lut(colormap)
        self.tex.write(rgba.tobytes(), viewport=(0, row, 256, 1), alignment=1)
        self._rows[row] = colormap

    def release(self) -> None:
        self.device.release(self.tex)


class TilePainter:
    """The program and a buffer of tile quads, one instance each (grown by doubling when a
    frame needs more)."""

    def __init__(self, device: Device, dtype: np.dtype, sampling: str = "nearest",
                 encoding: str = "exact", label: str = "science.quads") -> None:
        self.device = device
        self.label = label
        # BC4 slots are normalised: a float sampler whatever the source's dtype
        sampler = "sampler2D" if encoding == "bc4" else GL_DTYPES[np.dtype(dtype).name][1]
        linear, encoded = int(sampling == "linear"), int(encoding == "bc4")
        defines = {"#define VALUE_SAMPLER sampler2D": f"#define VALUE_SAMPLER {sampler}",
                   "#define LINEAR 0": f"#define LINEAR {linear}",
                   "#define ENCODED 0": f"#define ENCODED {encoded}",
                   "#define MAX_CHANNELS 16": f"#define MAX_CHANNELS {MAX_CHANNELS}"}
        vert, frag = (load_shader(f"science_tiles.{k}.glsl") for k in ("vert", "frag"))
        for old, new in defines.items():
            vert, frag = vert.replace(old, new), frag.replace(old, new)
        self.program = device.shared_program(
            vertex_shader=vert, fragment_shader=frag,
            label=f"science.{sampler}.{sampling}.{encoding}")
        # the tile's texel range feeds linear sampling only, the slot's map to values BC4
        # only (the programs without them drop them)
        tile, tiles = ("4f", ["in_tile"]) if linear else ("16x", [])
        value, values = ("2f", ["in_range"]) if encoded else ("8x", [])
        self._layout = (f"4f 4f 2f {tile} 1f {value}/i", "in_world", "in_texel", "in_shift",
                        *tiles, "in_channel", *values)
        self.luts = LutTexture(device)
        self._vbo = self._vao = None
        self._capacity = 0

    def reserve(self, quads: int) -> None:
        """Room for `quads` quads (made before the frame's split, so the split counts it)."""
        if quads <= self._capacity:
            return
        self._release_buffers()
        cap = max(64, 1 << (quads - 1).bit_length())
        self._vbo = self.device.buffer(reserve=cap * FLOATS_PER_QUAD * 4, dynamic=True,
                                       category=Category.BUFFER, label=self.label)
        self._vao = self.device.vertex_array(
            self.program, [(self._vbo, *self._layout)],
            label=f"{self.label}.vao")
        self._capacity = cap

    def draw(self, quads_table: np.ndarray, displays: Sequence[ChannelDisplay],
             cache: ValueCache | EncodedValueCache, center: tuple[float, float], scale: float,
             screen: tuple[int, int]) -> None:
        """Draw `quads_table` ((quads, FLOATS_PER_QUAD) float32) into the bound target;
        displays[r] is channel row r's look."""
        quads = len(quads_table)
        params = np.zeros((MAX_CHANNELS, 4), np.float32)
        for row, d in enumerate(displays):
            params[row] = (d.low, d.high, d.gamma, row)
            self.luts.set(row, d.colormap)
        if not quads:
            return
        self.reserve(quads)
        self._vbo.write(np.ascontiguousarray(quads_table, np.float32).tobytes())
        prog = self.program
        prog["u_center"].value = (float(center[0]), float(center[1]))
        prog["u_scale"].value = float(scale)
        prog["u_screen"].value = (float(screen[0]), float(screen[1]))
        prog["u_params"].write(params.tobytes())
        cache.tex.use(0)
        self.luts.tex.use(1)
        prog["u_values"].value = 0
        prog["u_luts"].value = 1
        self.device.set_state(additive=True)
        self._vao.render(vertices=6, instances=quads)  # triangles, the default mode

    def _release_buffers(self) -> None:
        for obj in (self._vao, self._vbo):
            if obj is not None:
                self.device.release(obj)
        self._vao = self._vbo = None
        self._capacity = 0

    def release(self) -> None:
        self._release_buffers()
        self.luts.release()
