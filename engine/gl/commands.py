"""Commands: what the engine does to GL objects after they exist.

Uploads (from client memory or a staging buffer, whole levels or bands of block rows),
GPU copies, read-backs, driver size queries, texture parameters the streamer needs, and the
fixed-function state presets passes use. Each runs on the render thread and turns a GL error
into a typed one naming the object. Nothing here creates or deletes objects (the allocator
does); fences are made by the device through the allocator and only polled here.
"""
from __future__ import annotations

import ctypes as C
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import moderngl

from ..errors import GLError
from ..memory.sizes import level_bytes, mip_dims
from . import constants as K
from .allocator import Allocator
from .context import RenderThread
from .raw import RawGL
from .textures import GpuTexture


@functools.lru_cache(maxsize=1024)
def _stored_geometry(fmt_name: str, chain_width: int, chain_height: int, base_level: int,
                     levels: int) -> tuple[tuple[int, int, int], ...]:
    """(width, height, bytes of one image) of each stored level of a texture: the same few
    shapes come up thousands of times when a batch of alike textures is registered."""
    out = []
    for chain_level in range(base_level, base_level + levels):
        w, h = mip_dims(chain_width, chain_height, chain_level)
        out.append((w, h, level_bytes(fmt_name, w, h)))
    return tuple(out)


def _pointer(buf: bytes | memoryview):
    """A pointer argument to `buf` for a GL call, without copying where possible: bytes
    pass as they are (ctypes hands GL their buffer), writable memory through from_buffer;
    only read-only views of something else are copied (as `upload` does)."""
    if isinstance(buf, bytes):
        return buf
    if buf.readonly:
        return (C.c_ubyte * buf.nbytes).from_buffer_copy(buf)
    return (C.c_ubyte * buf.nbytes).from_buffer(buf)


def _offset(ptr, offset: int) -> C.c_void_p:
    """`ptr` advanced by `offset` bytes (a cube map level's faces lie one after another)."""
    base = C.cast(C.c_char_p(ptr), C.c_void_p).value if isinstance(ptr, bytes) \
        else C.addressof(ptr)
    return C.c_void_p(base + offset)


@dataclass(eq=False)
class Fence:
    """A GL sync object: signalled once the GPU has finished the commands before it."""

    sync: int
    label: str


class Commands:
    """Texture data in and out, copies, parameters and fence polls (render thread)."""

    def __init__(self, raw: RawGL, thread: RenderThread, allocator: Allocator,
                 copy_image: bool) -> None:
        self._raw = raw
        self._thread = thread
        self._alloc = allocator
        self._copy_image = copy_image

    # ------------------------------------------------------------------ uploads
    def upload(self, tex: GpuTexture, chain_level: int, data: bytes | memoryview,
               layer: int = 0, face: int = 0, rows: tuple[int, int] | None = None) -> None:
        """Fill one chain level of one layer/face, or only texel rows [y0, y1) of it (a
        multiple of the block height, or up to the bottom edge). `data` is exactly those
        bytes; compressed data is stored row of blocks after row of blocks, so a band of
        rows is one contiguous slice of the level."""
        buf = memoryview(data).cast("B")
        cbuf = (C.c_ubyte * buf.nbytes).from_buffer_copy(buf) if buf.readonly else \
            (C.c_ubyte * buf.nbytes).from_buffer(buf)
        self._tex_sub_image(tex, chain_level, layer, face, buf.nbytes, cbuf, rows)

    def upload_from_buffer(self, tex: GpuTexture, chain_level: int, buffer_glo: int,
                           offset: int, nbytes: int, layer: int = 0, face: int = 0,
                           rows: tuple[int, int] | None = None) -> None:
        """Fill one level (or rows of it) from a pixel unpack buffer (the streamer's staging
        ring): the driver copies asynchronously instead of from client memory in the call."""
        self._raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, buffer_glo)
        try:
            self._tex_sub_image(tex, chain_level, layer, face, nbytes, C.c_void_p(offset),
                                rows)
        finally:
            self._raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, 0)

    def _tex_sub_image(self, tex: GpuTexture, chain_level: int, layer: int, face: int,
                       nbytes: int, pointer, rows: tuple[int, int] | None = None) -> None:
        self._thread.require("upload")
        lvl = tex.storage_level(chain_level)
        w, h = mip_dims(tex.chain_width, tex.chain_height, chain_level)
        f = tex.fmt
        y0, y1 = rows if rows is not None else (0, h)
        if not (0 <= y0 < y1 <= h and y0 % f.block_h == 0
                and (y1 == h or y1 % f.block_h == 0)):
            raise ValueError(f"{tex.label}: rows {y0}..{y1} of a {h}-row level are not whole "
                             f"blocks")
        expected = level_bytes(f, w, y1 - y0)
        if nbytes != expected:
            raise ValueError(f"{tex.label}: level {chain_level} rows {y0}..{y1} need "
                             f"{expected} bytes, got {nbytes}")
        raw, hh = self._raw, y1 - y0
        raw.glBindTexture(tex.target, tex.glo)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 1)
        if tex.target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY):
            z = layer * tex.faces + face
            if f.compressed:
                raw.glCompressedTexSubImage3D(tex.target, lvl, 0, y0, z, w, hh, 1,
                                              f.gl_internal, expected, pointer)
            else:
                raw.glTexSubImage3D(tex.target, lvl, 0, y0, z, w, hh, 1, f.gl_format,
                                    f.gl_type, pointer)
        else:
            target = K.TEXTURE_CUBE_MAP_POSITIVE_X + face if tex.faces == 6 else tex.target
            if f.compressed:
                raw.glCompressedTexSubImage2D(target, lvl, 0, y0, w, hh, f.gl_internal,
                                              expected, pointer)
            else:
                raw.glTexSubImage2D(target, lvl, 0, y0, w, hh, f.gl_format, f.gl_type,
                                    pointer)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 4)
        raw.glBindTexture(tex.target, 0)
        self._alloc.check_errors(f"upload of level {chain_level} to '{tex.label}'")

    def upload_levels(self, tex: GpuTexture,
                      levels: Sequence[tuple[int, bytes | memoryview]]) -> None:
        """Fill several whole chain levels (every layer and face, KTX2 order: layer-major,
        then face) in one go: one bind, one pixel-store pair and one error check for the
        texture instead of one of each per level and image. Registering 10,000 textures
        spent most of its GL time on that per-level overhead (7 tail levels each). Every
        level's size is checked, as `upload` checks it, before any byte goes to GL."""
        self._thread.require("upload")
        levels = list(levels)
        f = tex.fmt
        images = tex.layers * tex.faces
        work = []
        first = tex.base_level
        geometry = _stored_geometry(f.name, tex.chain_width, tex.chain_height, first,
                                    tex.levels)
        for chain_level, data in levels:
            lvl = chain_level - first
            if not 0 <= lvl < len(geometry):
                tex.storage_level(chain_level)  # raises the usual ValueError
            w, h, image = geometry[lvl]
            buf = data if isinstance(data, bytes) else memoryview(data).cast("B")
            n = len(buf)
            if n != image * images:
                raise ValueError(f"{tex.label}: level {chain_level} needs {image * images} "
                                 f"bytes ({images} images of {image}), got {n}")
            work.append((lvl, w, h, image, _pointer(buf)))
        if not work:
            return
        raw, target = self._raw, tex.target
        layered = target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY)
        cube = tex.faces == 6 and not layered
        raw.glBindTexture(target, tex.glo)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 1)
        try:
            if layered:  # all layers and faces of a level are one z range: one call
                sub = raw.glCompressedTexSubImage3D if f.compressed else raw.glTexSubImage3D
                for lvl, w, h, image, ptr in work:
                    if f.compressed:
                        sub(target, lvl, 0, 0, 0, w, h, images, f.gl_internal, image * images,
                            ptr)
                    else:
                        sub(target, lvl, 0, 0, 0, w, h, images, f.gl_format, f.gl_type, ptr)
            elif f.compressed:
                sub = raw.glCompressedTexSubImage2D
                for lvl, w, h, image, ptr in work:
                    if cube:
                        for face in range(6):
                            sub(K.TEXTURE_CUBE_MAP_POSITIVE_X + face, lvl, 0, 0, w, h,
                                f.gl_internal, image, _offset(ptr, face * image))
                    else:
                        sub(target, lvl, 0, 0, w, h, f.gl_internal, image, ptr)
            else:
                sub = raw.glTexSubImage2D
                for lvl, w, h, image, ptr in work:
                    if cube:
                        for face in range(6):
                            sub(K.TEXTURE_CUBE_MAP_POSITIVE_X + face, lvl, 0, 0, w, h,
                                f.gl_format, f.gl_type, _offset(ptr, face * image))
                    else:
                        sub(target, lvl, 0, 0, w, h, f.gl_format, f.gl_type, ptr)
        finally:
            raw.glPixelStorei(K.UNPACK_ALIGNMENT, 4)
            raw.glBindTexture(target, 0)
        codes = self._alloc.drain_errors()
        if codes:  # the message is built only when needed: this runs per registered texture
            names = ", ".join(K.ERROR_NAMES.get(c, hex(c)) for c in codes)
            raise GLError(f"upload of levels {[c for c, _ in levels]} to '{tex.label}': "
                          f"{names}", tuple(codes))

    def generate_mipmaps(self, tex: GpuTexture) -> None:
        """Fill every stored level below the first from it with the driver's filter
        (glGenerateMipmap): what naive loaders do, kept for the peers benchmark."""
        self._thread.require("generate_mipmaps")
        self._raw.glBindTexture(tex.target, tex.glo)
        self._raw.glGenerateMipmap(tex.target)
        self._raw.glBindTexture(tex.target, 0)
        self._alloc.check_errors(f"mipmap generation of '{tex.label}'")

    def copy_levels(self, src: GpuTexture, dst: GpuTexture, chain_levels: Sequence[int]) -> None:
        """GPU-side copy of whole levels (all layers/faces) between two textures holding
        overlapping ranges of the same chain: the streamer's grow/shrink keeps old levels."""
        self._thread.require("copy_levels")
        if not self._copy_image:
            raise GLError("glCopyImageSubData is not available (needs GL 4.3 / ARB_copy_image)")
        for lvl in chain_levels:
            w, h = mip_dims(src.chain_width, src.chain_height, lvl)
            self._raw.glCopyImageSubData(src.glo, src.target, src.storage_level(lvl), 0, 0, 0,
                                         dst.glo, dst.target, dst.storage_level(lvl), 0, 0, 0,
                                         w, h, src.layers * src.faces)
        self._alloc.check_errors(
            f"copy of levels {list(chain_levels)} '{src.label}' -> '{dst.label}'")

    def copy_squares(self, src: GpuTexture | moderngl.Texture,
                     dst: GpuTexture | moderngl.Texture,
                     squares: Sequence[tuple[tuple[int, int], tuple[int, int], int]]) -> None:
        """GPU-side copy of square texel regions of level 0, ((x, y) in `src`, (x, y) in
        `dst`, size) each: how slot caches change size and keep what they hold. (A moderngl
        texture is a 2D one.)"""
        self._thread.require("copy_squares")
        if not self._copy_image:
            raise GLError("glCopyImageSubData is not available (needs GL 4.3 / ARB_copy_image)")
        (a, at), (b, bt) = ((t.glo, getattr(t, "target", K.TEXTURE_2D)) for t in (src, dst))
        for (ax, ay), (bx, by), n in squares:
            self._raw.glCopyImageSubData(a, at, 0, ax, ay, 0, b, bt, 0, bx, by, 0, n, n, 1)
        if squares:
            self._alloc.check_errors(f"copy of {len(squares)} texture regions")

    # ------------------------------------------------------------------ read-backs
    def read_level(self, tex: GpuTexture, chain_level: int, face: int = 0,
                   rgba8: bool = False) -> bytes:
        """What the GPU holds for one level (every layer and face of an array; one face of
        a cube map), for tests and round trips. With `rgba8` the driver decodes it to
        RGBA8 (for compressed formats: the driver's own decoder, what sampling sees)."""
        self._thread.require("read_level")
        lvl = tex.storage_level(chain_level)
        w, h = mip_dims(tex.chain_width, tex.chain_height, chain_level)
        layered = tex.target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY)
        per = w * h * 4 if rgba8 else level_bytes(tex.fmt, w, h)
        n = per * (tex.layers * tex.faces if layered else 1)
        out = (C.c_ubyte * n)()
        target = K.TEXTURE_CUBE_MAP_POSITIVE_X + face if tex.target == K.TEXTURE_CUBE_MAP \
            else tex.target
        raw = self._raw
        raw.glBindTexture(tex.target, tex.glo)
        raw.glPixelStorei(K.PACK_ALIGNMENT, 1)
        if rgba8:
            raw.glGetTexImage(target, lvl, K.GL_RGBA, K.UNSIGNED_BYTE, out)
        elif tex.fmt.compressed:
            raw.glGetCompressedTexImage(target, lvl, out)
        else:
            raw.glGetTexImage(target, lvl, tex.fmt.gl_format, tex.fmt.gl_type, out)
        raw.glPixelStorei(K.PACK_ALIGNMENT, 4)
        raw.glBindTexture(tex.target, 0)
        self._alloc.check_errors(f"read back of level {chain_level} of '{tex.label}'")
        return bytes(out)

    def driver_level_size(self, tex: GpuTexture, chain_level: int) -> int:
        """GL_TEXTURE_COMPRESSED_IMAGE_SIZE of one level as the driver reports it."""
        self._thread.require("driver_level_size")
        target = K.TEXTURE_CUBE_MAP_POSITIVE_X if tex.target == K.TEXTURE_CUBE_MAP else tex.target
        self._raw.glBindTexture(tex.target, tex.glo)
        n = self._raw.tex_level_int(target, tex.storage_level(chain_level),
                                    K.TEXTURE_COMPRESSED_IMAGE_SIZE)
        self._raw.glBindTexture(tex.target, 0)
        self._alloc.check_errors("GL_TEXTURE_COMPRESSED_IMAGE_SIZE query")
        return n

    def unbind(self, unit: int, layered: bool = False) -> None:
        """Bind no texture to `unit` (its 2D or 2D-array target): what a texture that lost
        its storage samples (black), instead of the last texture bound there."""
        self._raw.glActiveTexture(0x84C0 + unit)
        self._raw.glBindTexture(K.TEXTURE_2D_ARRAY if layered else K.TEXTURE_2D, 0)

    # ------------------------------------------------------------------ parameters
    def set_min_lod(self, tex: GpuTexture, lod: float) -> None:
        """Clamp sampling to storage levels >= `lod` (the streamer's fade-in)."""
        self._tex_parameter(tex, K.TEXTURE_MIN_LOD, float(lod), integer=False)

    def set_base_level(self, tex: GpuTexture, storage_level: int) -> None:
        """The finest storage level sampling may use (sparse textures: the committed one)."""
        self._tex_parameter(tex, K.TEXTURE_BASE_LEVEL, int(storage_level), integer=True)

    def _tex_parameter(self, tex: GpuTexture, pname: int, value: float | int,
                       integer: bool) -> None:
        self._thread.require("texture parameter")
        self._raw.glBindTexture(tex.target, tex.glo)
        if integer:
            self._raw.glTexParameteri(tex.target, pname, int(value))
        else:
            self._raw.glTexParameterf(tex.target, pname, float(value))
        self._raw.glBindTexture(tex.target, 0)

    # ------------------------------------------------------------------ fences
    def fence_signalled(self, fence: Fence) -> bool:
        """Poll without waiting (a zero timeout): has the GPU passed the fence?"""
        status = self._raw.glClientWaitSync(C.c_void_p(fence.sync), 0, 0)
        return status in (K.ALREADY_SIGNALED, K.CONDITION_SATISFIED)
