"""Basis Universal payloads in KTX2 (UASTC, ETC1S/BasisLZ): transcoded one level at a time.

glTF's KHR_texture_basisu ships textures as KTX2 files whose levels hold UASTC blocks or
ETC1S (BasisLZ) slices. No GPU samples those directly, so each level is transcoded on the
thread that reads it (the streamer's I/O workers: transcoding is CPU work and releases the
GIL) to the best block format the driver samples, chosen the way three.js's KTX2Loader and
Babylon choose: BC4/BC5 for one- and two-channel data, else BC7, else BC3 (alpha) or BC1,
else RGBA8. To the rest of the engine a Basis file is then an ordinary `TextureFile` whose
`pixel_format` is that target and whose levels have the target's exact sizes.

Why a level is transcoded from a small KTX2 of its own: streaming reads *one* level at a
byte offset, but the transcoder (opengl_basisu, which wraps Binomial's basis_universal)
takes whole files. So the reader builds an in-memory KTX2 holding the header, the DFD, the
level's slice of the BasisLZ global data and the level's bytes, and transcodes that. zlib
levels (which basis_universal cannot inflate) and zstd levels are inflated by our own
supercompression code first, so the transcoder only ever sees raw UASTC.

The binding is optional (`pip install 'vram-budget-renderer[basis]'`): without it these files
raise the same `UnsupportedFormatError` as before, naming the extra to install. Encoding (bake's
`--format uastc/etc1s`) uses a second library, alktx2 (basis_universal's encoder); see
docs/basis.md for why two.
"""
from __future__ import annotations

import importlib
import logging
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TextureFormatError, UnsupportedFormatError, install_hint
from ..formats import BY_NAME, PixelFormat
from .container import Level, check_geometry, level_geometry, read_prefix
from .ktx2_file import Ktx2File
from .supercompression import inflate_zlib, inflate_zstd

log = logging.getLogger(__name__)

#: The optional extra `basis`'s modules, imported on first use rather than with this module:
#: every KTX2 open imports this one, and the two cost ~50 ms at each start of a command that
#: never meets a Basis file. `_UNLOADED` until then, None where the extra is absent (tests
#: set None to stand for that).
_UNLOADED: Any = object()
_ob: Any = _UNLOADED  # opengl_basisu, the transcoder
_enc: Any = _UNLOADED  # alktx2, the encoder (x86_64 Linux/Windows wheels only)


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - exercised where the extra is absent
        return None


def _transcoder() -> Any:
    global _ob
    if _ob is _UNLOADED:
        _ob = _optional("opengl_basisu")
    return _ob


def _encoder() -> Any:
    global _enc
    if _enc is _UNLOADED:
        _enc = _optional("alktx2")
    return _enc

#: DFD colour models of the two Basis codecs (Khronos Data Format 1.3, KHR_DF_MODEL_*).
MODEL_ETC1S = 163
MODEL_UASTC = 166
_SCHEME_NAMES = {0: "none", 1: "BasisLZ", 2: "zstd", 3: "zlib"}
_KTX2_IDENTIFIER = b"\xabKTX 20\xbb\r\n\x1a\n"
_HEADER = struct.Struct("<12s9I4I2Q")
_LEVEL = struct.Struct("<3Q")
_SGD_HEADER = struct.Struct("<HHIIII")  # endpointCount, selectorCount, 4 byte lengths
_IMAGE_DESC = struct.Struct("<5I")  # flags, rgb offset/length, alpha offset/length
_UASTC_BLOCK = 16
_SRGB_TRANSFER = 2  # KHR_DF_TRANSFER_SRGB
# DFD channel ids of the first sample / second sample (Khronos Data Format 1.3).
_UASTC_CHANNELS = {0: "rgb", 3: "rgba", 4: "r", 5: "rg", 6: "rg"}
_ETC1S_RRR, _ETC1S_GGG, _ETC1S_AAA = 3, 4, 15

#: Target format families by preference, as three.js/Babylon order them on desktop GL.
_DEFAULT_SAMPLED = frozenset({"BC1_RGB", "BC1_RGB_SRGB", "BC3", "BC3_SRGB", "BC4", "BC5",
                              "BC7", "BC7_SRGB"})
_sampled: frozenset[str] = _DEFAULT_SAMPLED
_sampled_lock = threading.Lock()

# Our format family -> opengl_basisu target name.
_TARGETS = {"BC1": "bc1", "BC3": "bc3", "BC4": "bc4", "BC5": "bc5", "BC7": "bc7",
            "RGBA8": "rgba8"}


def available() -> bool:
    """Whether the transcoder (opengl_basisu) is installed."""
    return _transcoder() is not None


def set_sampled_formats(names: Iterable[str]) -> None:
    """Tell the chooser which compressed formats (our names) the driver samples.

    The textures layer cannot ask GL, so the layer that owns the context calls this once
    (`engine.gl.basis_targets.configure(device)`); until then every desktop GL 4.2+ format
    (BC1-BC7) is assumed. Files opened afterwards use the new set; open files keep theirs."""
    global _sampled
    with _sampled_lock:
        _sampled = frozenset(names)


def sampled_formats() -> frozenset[str]:
    return _sampled


def choose_target(channels: str, srgb: bool, sampled: frozenset[str] | None = None) -> str:
    """Our format name to transcode a Basis texture with these stored channels to.

    `channels` is "r", "rg", "rgb" or "rgba". One- and two-channel data (roughness, normal
    XY) go to BC4/BC5, which hold them at twice BC1's precision; colour goes to BC7; without
    BPTC, BC3 keeps alpha and BC1 holds opaque colour; with no BC format at all, RGBA8."""
    have = _sampled if sampled is None else sampled
    suffix = "_SRGB" if srgb else ""
    candidates: list[str] = []
    if channels == "r" and not srgb:
        candidates.append("BC4")
    if channels == "rg" and not srgb:
        candidates.append("BC5")
    candidates.append("BC7" + suffix)
    candidates.append(("BC3" if channels == "rgba" else "BC1_RGB") + suffix)
    for name in candidates:
        if name in have:
            return name
    return "RGBA8" + suffix


# ---------------------------------------------------------------------------- header
@dataclass(frozen=True)
class BasisHeader:
    """What the KTX2 header and DFD say about a Basis payload."""

    codec: str  # "UASTC" or "ETC1S"
    scheme: int  # 0 none, 1 BasisLZ, 2 zstd, 3 zlib
    width: int
    height: int  # 0 for 1D, as stored
    depth: int
    layers: int  # as stored (0 = not an array)
    faces: int
    level_count: int  # as stored (0 = generate mips)
    dfd: tuple[int, int]
    sgd: tuple[int, int]
    srgb: bool
    channels: str


def basis_codec(scheme: int, vk_format: int, dfd_model: int | None) -> str | None:
    """"UASTC", "ETC1S" or None: whether a KTX2 header describes a Basis payload."""
    if scheme == 1 and vk_format == 0:
        return "ETC1S"
    if vk_format == 0 and dfd_model == MODEL_UASTC and scheme in (0, 2, 3):
        return "UASTC"
    return None


def _dfd_facts(path: Path, codec: str, dfd: bytes) -> tuple[bool, str]:
    """(sRGB?, stored channels) from the DFD's basic block and its samples."""
    if len(dfd) < 4 + 24:
        raise TextureFormatError(path, f"DFD: {len(dfd)} bytes, too short for a basic block")
    block_size = struct.unpack_from("<H", dfd, 4 + 6)[0]
    transfer = dfd[4 + 10]
    samples = max(0, (min(block_size, len(dfd) - 4) - 24) // 16)
    ids = [dfd[4 + 24 + 16 * i + 3] & 0x0F for i in range(samples)]
    if not ids:
        raise TextureFormatError(path, "DFD: no samples")
    srgb = transfer == _SRGB_TRANSFER
    if codec == "UASTC":
        channels = _UASTC_CHANNELS.get(ids[0], "rgba")
    else:
        first = "r" if ids[0] == _ETC1S_RRR else "rgb"
        second = ids[1] if len(ids) > 1 else None
        if second == _ETC1S_GGG and first == "r":
            channels = "rg"
        elif second == _ETC1S_AAA:
            channels = "rgba"
        else:
            channels = first
    return srgb, channels


# ---------------------------------------------------------------------------- the file
@dataclass
class BasisKtx2File(Ktx2File):
    """A KTX2 file with a Basis payload, seen as the format it transcodes to.

    `levels[i].offset/stored_nbytes` locate level i's Basis bytes on disk; `nbytes` and
    `image_nbytes` are the transcoded (target format) sizes that uploads and ledgers use.
    Every read returns transcoded bytes."""

    codec: str = "UASTC"
    scheme: int = 0
    #: uncompressedByteLength of each level as stored (UASTC raw bytes; 0 for BasisLZ).
    source_nbytes: tuple[int, ...] = ()
    header_fields: tuple[int, ...] = ()
    dfd_bytes: bytes = b""
    sgd_region: tuple[int, int] = (0, 0)
    _sgd_cache: list[bytes] = field(default_factory=list, repr=False)

    @property
    def target(self) -> str:
        return _TARGETS[self.pixel_format.family]

    def _read_all(self, lv: Level) -> bytes:
        images = [self._transcode(lv, layer, face)
                  for layer in range(self.layers) for face in range(self.faces)]
        return b"".join(images)

    def _read_image(self, lv: Level, layer: int, face: int) -> bytes:
        return self._transcode(lv, layer, face)

    def _plain_levels(self) -> bool:
        return False  # every level is transcoded

    # -- internals -----------------------------------------------------------------------
    def _sgd(self) -> bytes:
        if not self._sgd_cache:  # a race reads it twice, harmlessly: bytes are immutable
            offset, length = self.sgd_region
            self._sgd_cache.append(self._read_span(offset, length, "supercompression global "
                                                                   "data") if length else b"")
        return self._sgd_cache[0]

    def _level_payload(self, lv: Level) -> bytes:
        """The level's Basis bytes, inflated when zstd/zlib wrap UASTC."""
        raw = self._read_span(lv.offset, lv.stored_nbytes, f"level {lv.index}")
        want = self.source_nbytes[lv.index]
        if self.scheme == 2:
            return inflate_zstd(self.path, raw, want, f"level {lv.index}")
        if self.scheme == 3:
            return inflate_zlib(self.path, raw, want, f"level {lv.index}")
        return raw

    def level_ktx2(self, level: int) -> bytes:
        """A self-contained KTX2 (one level, the given level's size) the transcoder accepts."""
        lv = self.level(level)
        payload = self._level_payload(lv)
        sgd = b""
        if self.scheme == 1:
            sgd = _level_sgd(self.path, self._sgd(), lv.index, len(self.levels),
                             self.layers * self.faces * lv.depth, len(payload))
        return build_ktx2(self.header_fields, lv, self.dfd_bytes, sgd, payload,
                          scheme=1 if self.scheme == 1 else 0)

    def _library(self) -> Any:
        """The transcoder, or the UnsupportedFormatError saying how to install it."""
        ob = _transcoder()
        if ob is None:
            raise UnsupportedFormatError(self.path, _codec_label(self.codec),
                                         f"needs opengl_basisu: {install_hint('basis')}")
        return ob

    def _transcode(self, lv: Level, layer: int, face: int) -> bytes:
        ob = self._library()
        mini = self.level_ktx2(lv.index)
        try:
            tex = ob.open(mini)
            image = tex.transcode(self.target, level=0, face=face, layer=layer)
        except (ValueError, IndexError) as exc:  # BasisuError is a ValueError
            raise TextureFormatError(self.path, f"level {lv.index}: {self.codec} transcode to "
                                                f"{self.format} failed ({exc})") from exc
        data = np.ascontiguousarray(image.data).tobytes()
        if self.target == "bc7" and "a" not in self.extra.get("basis_channels", "rgba"):
            # The file declares no alpha, but the UASTC/ETC1S -> BC7 transcoder leaves
            # alpha 254 in p-bit modes (39% of a photo's texels): hold it to 255 (issue 15).
            from .encode import force_opaque_bc7
            data = force_opaque_bc7(data)
        if len(data) != lv.image_nbytes:
            raise TextureFormatError(self.path, f"level {lv.index}: transcoded {len(data)} "
                                                f"bytes, expected {lv.image_nbytes}")
        return data

    def transcode_rgba(self, level: int = 0, layer: int = 0, face: int = 0) -> np.ndarray:
        """The library's own RGBA8 transcode of one image: the reference tests hold the
        block-format path to."""
        ob = self._library()
        try:
            image = ob.open(self.level_ktx2(level)).transcode("rgba8", 0, face, layer)
        except (ValueError, IndexError) as exc:
            raise TextureFormatError(self.path, f"level {level}: RGBA transcode failed "
                                                f"({exc})") from exc
        return np.ascontiguousarray(image.data)


def _codec_label(codec: str) -> str:
    return "BasisLZ/ETC1S" if codec == "ETC1S" else "UASTC"


def _level_sgd(path: Path, sgd: bytes, level: int, level_count: int, images: int,
               level_len: int) -> bytes:
    """The BasisLZ global data cut down to one level: the same codebooks and tables, and
    only that level's image descriptors (whose offsets are relative to the level's bytes,
    so they stay valid in the one-level file)."""
    if len(sgd) < _SGD_HEADER.size:
        raise TextureFormatError(path, f"supercompression global data: {len(sgd)} bytes, "
                                       f"shorter than its header")
    _, _, ends, sels, tables, extended = _SGD_HEADER.unpack_from(sgd)
    all_images = images * level_count
    descs_end = _SGD_HEADER.size + all_images * _IMAGE_DESC.size
    tail = ends + sels + tables + extended
    if descs_end + tail != len(sgd):
        raise TextureFormatError(path, f"supercompression global data: {len(sgd)} bytes, but "
                                       f"its header and {all_images} image descriptors need "
                                       f"{descs_end + tail}")
    start = _SGD_HEADER.size + level * images * _IMAGE_DESC.size
    descs = sgd[start:start + images * _IMAGE_DESC.size]
    for i in range(images):
        _, rgb_off, rgb_len, a_off, a_len = _IMAGE_DESC.unpack_from(descs, i * _IMAGE_DESC.size)
        if rgb_off + rgb_len > level_len or a_off + a_len > level_len:
            raise TextureFormatError(path, f"level {level} image {i}: slice outside the "
                                           f"level's {level_len} bytes")
    return sgd[:_SGD_HEADER.size] + descs + sgd[descs_end:]


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def build_ktx2(header_fields: Sequence[int], lv: Level, dfd: bytes, sgd: bytes,
               payload: bytes, *, scheme: int) -> bytes:
    """Assemble a one-level KTX2: header (level 0 = `lv`'s size), DFD, SGD and `payload`.

    `header_fields` = (typeSize, pixelHeight-was-zero flag, pixelDepth-was-zero flag,
    layerCount, faceCount) of the source file."""
    type_size, height_zero, depth_zero, layers, faces = header_fields
    dfd_off = _HEADER.size + _LEVEL.size
    sgd_off = _align(dfd_off + len(dfd), 8) if sgd else 0
    end = (sgd_off + len(sgd)) if sgd else dfd_off + len(dfd)
    level_off = _align(end, 16)
    uncompressed = 0 if scheme == 1 else len(payload)
    head = _HEADER.pack(_KTX2_IDENTIFIER, 0, type_size, lv.width, 0 if height_zero else lv.height,
                        0 if depth_zero else lv.depth, layers, faces, 1, scheme,
                        dfd_off, len(dfd), 0, 0, sgd_off, len(sgd))
    out = bytearray(head)
    out += _LEVEL.pack(level_off, len(payload), uncompressed)
    out += dfd
    if sgd:
        out += bytes(sgd_off - len(out)) + sgd
    out += bytes(level_off - len(out)) + payload
    return bytes(out)


def open_basis_ktx2(path: Path, prefix: bytes, fields: tuple[Any, ...], size: int,
                    codec: str) -> BasisKtx2File:
    """A `BasisKtx2File` from an already parsed KTX2 header (`fields`: the header struct)."""
    (_, vk, type_size, width, height, depth, layers, faces, level_count, scheme,
     dfd_off, dfd_len, _kvd_off, _kvd_len, sgd_off, sgd_len) = fields
    if _transcoder() is None:
        raise UnsupportedFormatError(path, _codec_label(codec),
                                     "needs a Basis Universal transcoder (opengl_basisu): "
                                     f"{install_hint('basis')}")
    if depth > 1 or (faces == 6 and depth):
        raise UnsupportedFormatError(path, _codec_label(codec), "3D Basis textures")
    if height == 0:
        raise TextureFormatError(path, f"pixelHeight 0 (1D) with block format "
                                       f"{_codec_label(codec)}")
    if codec == "ETC1S" and not sgd_len:
        raise TextureFormatError(path, "BasisLZ without supercompression global data")
    dfd = read_prefix(path, dfd_off + dfd_len)[dfd_off:] if dfd_len else b""
    if len(dfd) != dfd_len:
        raise TextureFormatError(path, "DFD: truncated")
    srgb, channels = _dfd_facts(path, codec, dfd)
    fmt: PixelFormat = BY_NAME[choose_target(channels, srgb)]
    n_layers = max(1, layers)
    check_geometry(path, fmt, width, height, 1, n_layers, faces, max(1, level_count))
    count = max(1, level_count)
    end = _HEADER.size + count * _LEVEL.size
    if len(prefix) < end:
        raise TextureFormatError(path, f"level index: truncated (needs {end} bytes)")
    levels: list[Level] = []
    sources: list[int] = []
    spans = [(0, end, "header and level index"), (dfd_off, dfd_off + dfd_len, "DFD")]
    if sgd_len:
        if sgd_off < end or sgd_off + sgd_len > size:
            raise TextureFormatError(path, f"index SGD: bytes {sgd_off}..{sgd_off + sgd_len} "
                                           f"outside the file ({size} bytes)")
        spans.append((sgd_off, sgd_off + sgd_len, "SGD"))
    for i in range(count):
        offset, stored, uncompressed = _LEVEL.unpack_from(prefix, _HEADER.size + i * _LEVEL.size)
        w, h, d, image = level_geometry(fmt, width, height, 1, i)
        where = f"level index [{i}]"
        if codec == "UASTC":
            expected = -(-w // 4) * -(-h // 4) * _UASTC_BLOCK * n_layers * faces
            if uncompressed != expected:
                raise TextureFormatError(path, f"{where}: uncompressedByteLength {uncompressed} "
                                               f"!= {expected} for UASTC {w}x{h}")
            if scheme == 0 and stored != expected:
                raise TextureFormatError(path, f"{where}: byteLength {stored} != "
                                               f"uncompressedByteLength {expected}")
        elif uncompressed != 0:
            raise TextureFormatError(path, f"{where}: uncompressedByteLength {uncompressed} "
                                           "(BasisLZ levels must declare 0)")
        if stored == 0 or offset + stored > size:
            raise TextureFormatError(path, f"{where}: bytes {offset}..{offset + stored} "
                                           f"outside the file ({size} bytes)")
        spans.append((offset, offset + stored, f"level {i}"))
        levels.append(Level(i, w, h, d, offset, stored, image * n_layers * faces, image))
        sources.append(uncompressed)
    spans.sort()
    for (_, a_end, a), (b_start, _, b) in pairwise(spans):
        if b_start < a_end:
            raise TextureFormatError(path, f"level index: {b} overlaps {a}")
    log.debug("opened %s: %s -> %s %dx%d, %d levels", path, codec, fmt.name, width, height,
              count)
    return BasisKtx2File(
        path=path, container="ktx2", pixel_format=fmt, width=width, height=height, depth=1,
        layers=n_layers, faces=faces, levels=tuple(levels),
        supercompression=_SCHEME_NAMES.get(scheme, str(scheme)), is_array=layers > 0,
        file_size=size,
        extra={"vk_format": vk, "vk_format_name": f"VK_FORMAT_UNDEFINED ({vk})",
               "type_size": type_size, "level_count_field": level_count,
               "basis_codec": codec, "basis_channels": channels, "transcoded_to": fmt.name},
        codec=codec, scheme=scheme, source_nbytes=tuple(sources),
        header_fields=(type_size, 0, 1, layers, faces), dfd_bytes=dfd,
        sgd_region=(sgd_off, sgd_len))


# ---------------------------------------------------------------------------- encoding
BASIS_FORMATS = ("uastc", "etc1s")
#: UASTC is meant to be stored zstd-supercompressed (KHR_texture_basisu, KTX-Software's
#: defaults); the level used when the caller names none.
DEFAULT_UASTC_ZSTD = 6


def encoder_available() -> bool:
    """Whether the encoder (alktx2, basis_universal's encoder) is installed."""
    return _encoder() is not None


def encode_ktx2(levels: Sequence[np.ndarray], codec: str, *, srgb: bool,
                zstd_level: int | None = None, quality: int | None = None, effort: int = 2,
                threads: int = 0) -> bytes:
    """A KTX2 file (bytes) holding our own mip chain `levels` ((H, W, 4) uint8, level 0
    first) as UASTC (zstd-supercompressed) or ETC1S (BasisLZ), with the DFD, colour model
    and transfer function basis_universal writes, i.e. what glTF's KHR_texture_basisu reads.

    `quality` (1-100) defaults to 100 for UASTC, because below 100 alktx2 turns on UASTC's
    rate-distortion optimisation (measured on a photo: 43.2 dB at 100, 30.9 dB at 50), and
    to 75 for ETC1S (33.6 dB; 100 adds 0.3 dB for 16% more bytes).

    Our mip chain is passed as it is (alpha-aware, filtered in linear light) rather than
    letting the encoder make its own, so a Basis bake and a BCn bake of one image hold the
    same pixels before compression."""
    codec = codec.lower()
    if codec not in BASIS_FORMATS:
        raise ValueError(f"unknown Basis codec {codec!r}; choose from {', '.join(BASIS_FORMATS)}")
    enc = _encoder()
    if enc is None:
        raise UnsupportedFormatError("<bake>", codec.upper(), "the Basis encoder alktx2 is not "
                                     f"installed: {install_hint('basis')} (alktx2 has wheels "
                                     "for x86_64 Linux and Windows)")
    if quality is None:
        quality = 100 if codec == "uastc" else 75
    chain = [(np.ascontiguousarray(lv, np.uint8).tobytes(), lv.shape[1], lv.shape[0])
             for lv in levels]
    has_alpha = bool((levels[0][..., 3] < 255).any())
    zstd = (zstd_level if zstd_level is not None else DEFAULT_UASTC_ZSTD) \
        if codec == "uastc" else None
    try:
        return bytes(enc.encode_raw_mips_to_ktx2(
            chain, has_alpha, codec=codec, quality=quality,
            effort=effort, srgb=srgb, linear=not srgb, threads=threads,
            zstd_supercompression_level=zstd, check_for_alpha=has_alpha,
            force_alpha=has_alpha))
    except RuntimeError as exc:
        raise TextureFormatError("<bake>", f"{codec} encode failed: {exc}") from exc
