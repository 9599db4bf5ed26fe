"""Serving a texture format the driver cannot sample: which format instead, and the bytes.

A macOS-class driver has no BPTC (BC7, BC6H), some drivers have no S3TC (BC1-BC3). The
streamer still serves such files: each level or tile is decoded on the I/O threads and, where
the driver samples one, re-encoded to a block format of the same block size (BC7 -> BC3 keeps
16 bytes a 4x4 block, so budgets, tile layouts and page-cache slots stay as they were), else
stored uncompressed (4 bytes a texel for colour). The policy (`served_format`) is pure; the
quality cost of each pair is measured on the first image it transcodes (`Transcoder`).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..errors import TextureFormatError, UnsupportedFormatError
from ..formats import PixelFormat, get
from .container import Level, TextureFile, level_geometry
from .decode import decode_image
from .encode import encode_refined
from .quality import psnr

log = logging.getLogger(__name__)

#: What each format may be served as, best first (the first one the driver samples wins).
#: BC4/BC5 are core since GL 3.0; their unsigned forms still fall back to R8/RG8.
FALLBACKS: dict[str, tuple[str, ...]] = {
    "BC7": ("BC3", "RGBA8"),
    "BC7_SRGB": ("BC3_SRGB", "RGBA8_SRGB"),
    "BC6H_UF": ("RGBA16F",),
    "BC1_RGB": ("RGBA8",),
    "BC1_RGB_SRGB": ("RGBA8_SRGB",),
    "BC1_RGBA": ("RGBA8",),
    "BC1_RGBA_SRGB": ("RGBA8_SRGB",),
    "BC2": ("RGBA8",),
    "BC2_SRGB": ("RGBA8_SRGB",),
    "BC3": ("RGBA8",),
    "BC3_SRGB": ("RGBA8_SRGB",),
    "BC4": ("R8",),
    "BC5": ("RG8",),
}


def served_format(fmt: PixelFormat, sampled: Callable[[PixelFormat], bool],
                  path: object = "<driver>") -> PixelFormat:
    """The format `fmt` is held in on a driver that samples what `sampled` accepts: itself
    when it can, else its first sampled fallback. Raises UnsupportedFormatError naming
    `path` when there is none (BC6H_SF, the signed RGTC forms: no CPU decoder to go
    through)."""
    if sampled(fmt):
        return fmt
    for name in FALLBACKS.get(fmt.name, ()):
        alt = get(name)
        if sampled(alt):
            return alt
    raise UnsupportedFormatError(path, fmt.name,
                                 "the driver cannot sample it and there is no fallback")


def served_table(names: Iterable[str], sampled: Callable[[PixelFormat], bool]
                 ) -> dict[str, str]:
    """{source format: served format} for `names`, "-" where nothing can serve it."""
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = served_format(get(name), sampled).name
        except UnsupportedFormatError:
            out[name] = "-"
    return out


def block_compatible(src: PixelFormat, dst: PixelFormat) -> bool:
    """Whether a region of `src` blocks becomes the same region of `dst` blocks byte for
    byte in size: what virtual-texture tiles and sparse pages need to keep their layout."""
    return (src.block_w, src.block_h, src.block_bytes) == (dst.block_w, dst.block_h,
                                                           dst.block_bytes)


def transcode(data: bytes, src: PixelFormat, dst: PixelFormat, width: int, height: int,
              path: object = "<memory>") -> bytes:
    """One width x height image of `src` bytes as `dst` bytes (CPU; any thread)."""
    if src is dst:
        return data
    rgba = decode_image(src.name, data, width, height, path)
    if dst.compressed:
        return encode_refined(rgba, dst)
    if dst.name in ("RGBA8", "RGBA8_SRGB"):
        return rgba.tobytes()
    if dst.name == "R8":
        return np.ascontiguousarray(rgba[..., 0]).tobytes()
    if dst.name == "RG8":
        return np.ascontiguousarray(rgba[..., :2]).tobytes()
    if dst.name == "RGBA16F":
        return (rgba.astype(np.float32) / 255.0).astype("<f2").tobytes()
    raise UnsupportedFormatError(path, src.name, f"no transcode to {dst.name}")


@dataclass(frozen=True)
class TranscodeCost:
    """The measured cost of serving one format as another, on its first image."""

    source: str
    served: str
    psnr_db: float
    bytes_ratio: float  # served bytes / source bytes


class Transcoder:
    """`transcode` for the I/O threads, and the one place each (source, served) pair is said:
    once, at WARNING, when a file is first served so (`announce`), with the memory it costs
    and its quality measured then on one small level of that file (the PSNR of the served
    image against the source's own decode; kept in `costs`). A cost the user should hear of
    once at startup, not per level, also when later reads come from a copy already in the
    served format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.costs: dict[tuple[str, str], TranscodeCost | None] = {}

    def __call__(self, data: bytes, src: PixelFormat, dst: PixelFormat, width: int,
                 height: int, path: object = "<memory>") -> bytes:
        return transcode(data, src, dst, width, height, path)

    def announce(self, tf: TextureFile, dst: PixelFormat) -> None:
        """Say once that files of `tf`'s format are served as `dst`: memory, and PSNR on
        `tf`'s finest level of at most 256x256 texels (None where it cannot be read)."""
        src = tf.pixel_format
        key = (src.name, dst.name)
        with self._lock:
            if key in self.costs or src is dst:
                return
            self.costs[key] = None  # said by this call
        ratio = dst.block_bytes / (dst.block_w * dst.block_h) \
            / (src.block_bytes / (src.block_w * src.block_h))
        lv = next((lv for lv in tf.levels if lv.width * lv.height <= 1 << 16), tf.levels[-1])
        try:
            data = tf.read_level(lv.index)
            a = decode_image(src.name, data, lv.width, lv.height, tf.path)
            out = transcode(data, src, dst, lv.width, lv.height, tf.path)
            db = float(psnr(a, decode_image(dst.name, out, lv.width, lv.height, tf.path)))
        except (TextureFormatError, OSError) as exc:  # the file's own error comes later
            log.warning("%s textures are served as %s (the driver cannot sample %s): %.2gx "
                        "its memory (quality not measured: %s)", src.name, dst.name,
                        src.name, ratio, exc)
            return
        with self._lock:
            self.costs[key] = TranscodeCost(src.name, dst.name, db, ratio)
        log.warning("%s textures are served as %s (the driver cannot sample %s): %.1f dB PSNR "
                    "against the %s decode on a %dx%d level of %s, %.2gx its memory",
                    src.name, dst.name, src.name, db, src.name, lv.width, lv.height,
                    getattr(tf.path, "name", tf.path), ratio)


#: The process's transcoder: each pair's cost is said once per run, whoever serves it.
TRANSCODER = Transcoder()


@dataclass
class ServedFile(TextureFile):
    """A texture file seen in the format it is served as: its levels' sizes are the served
    format's, and every read returns transcoded bytes (the streamer's workers call the reads,
    so the work stays on the I/O threads). `source` is the file as stored."""

    source: TextureFile | None = None
    transcoder: Transcoder = TRANSCODER

    @classmethod
    def of(cls, source: TextureFile, served: PixelFormat,
           transcoder: Transcoder = TRANSCODER) -> ServedFile:
        levels = []
        for lv in source.levels:
            w, h, d, image = level_geometry(served, source.width, source.height, source.depth,
                                            lv.index)
            count = image * source.layers * source.faces
            levels.append(Level(lv.index, w, h, d, lv.offset, count, count, image))
        return cls(path=source.path, container="served", pixel_format=served,
                   width=source.width, height=source.height, depth=source.depth,
                   layers=source.layers, faces=source.faces, levels=tuple(levels),
                   is_array=source.is_array, file_size=source.file_size,
                   extra={**source.extra, "served_from": source.format}, source=source,
                   transcoder=transcoder)

    def transcode_level(self, level: int, data: bytes) -> bytes:
        """Whole-level source bytes (every layer and face) as served bytes."""
        src = self.source
        assert src is not None
        lv = src.level(level)
        images = src.layers * src.faces * lv.depth
        step = len(data) // max(images, 1)
        return b"".join(self.transcoder(data[i * step:(i + 1) * step], src.pixel_format,
                                        self.pixel_format, lv.width, lv.height, self.path)
                        for i in range(images))

    def _read_image(self, lv: Level, layer: int, face: int) -> bytes:
        assert self.source is not None
        s = self.source.level(lv.index)
        return self.transcoder(self.source.read_level(lv.index, layer, face),
                               self.source.pixel_format, self.pixel_format, s.width, s.height,
                               self.path)

    def _read_all(self, lv: Level) -> bytes:
        assert self.source is not None
        return self.transcode_level(lv.index, self.source.read_level_all(lv.index))

    def read_block_rows(self, level: int, row0: int, count: int) -> bytes:
        """Block rows of the served format; only where both formats have the same blocks."""
        src = self.source
        assert src is not None
        if not block_compatible(src.pixel_format, self.pixel_format):
            raise ValueError(f"{self.path}: block rows of {src.format} served as {self.format}")
        lv = src.level(level)
        bh = src.pixel_format.block_h
        height = min(count * bh, lv.height - row0 * bh)
        return self.transcoder(src.read_block_rows(level, row0, count), src.pixel_format,
                               self.pixel_format, lv.width, height, self.path)


def serve_file(tf: TextureFile, sampled: Callable[[PixelFormat], bool]) -> TextureFile:
    """`tf` as the driver will hold it: itself, or a `ServedFile` whose reads transcode."""
    fmt = served_format(tf.pixel_format, sampled, tf.path)
    if fmt is tf.pixel_format:
        return tf
    TRANSCODER.announce(tf, fmt)
    return ServedFile.of(tf, fmt)


def served_tile_format(tf: TextureFile, sampled: Callable[[PixelFormat], bool]) -> PixelFormat:
    """The page-cache format of a virtual texture: the file's own, or a block-compatible
    fallback (tiles keep their slot layout). Raises UnsupportedFormatError otherwise, so the
    caller streams the file by whole levels instead."""
    fmt = served_format(tf.pixel_format, sampled, tf.path)
    if fmt is not tf.pixel_format and not block_compatible(tf.pixel_format, fmt):
        raise UnsupportedFormatError(tf.path, tf.format, f"served as {fmt.name}, whose blocks "
                                                         "differ: no virtual tiles")
    TRANSCODER.announce(tf, fmt)
    return fmt


def blocks_transcoder(src: PixelFormat, dst: PixelFormat, path: object = "<memory>",
                      transcoder: Transcoder = TRANSCODER) -> Callable[[bytes], bytes]:
    """bytes of any run of `src` blocks -> the same run of `dst` blocks. Blocks are coded
    independently, so a tile (payload and border) transcodes as one row of its blocks."""
    if not block_compatible(src, dst):
        raise ValueError(f"{src.name} and {dst.name} blocks differ")
    bb = src.block_bytes

    def serve(data: bytes) -> bytes:
        n = len(data) // bb
        return transcoder(data, src, dst, n * src.block_w, src.block_h, path)
    return serve
