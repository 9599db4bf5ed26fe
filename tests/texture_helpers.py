"""Builders of small KTX2 and DDS files for the texture-reader tests.

The DDS presets reproduce the header choices of real writers (texconv, NVTT, ImageMagick),
because those fields (pitch, flags, FourCC vs DX10) are where readers break in practice.
"""
from __future__ import annotations

import os
import struct
import tempfile
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import etcpak
import numpy as np
import pytest
import zstandard

from engine import textures
from engine.errors import TextureFormatError
from engine.formats import get
from engine.memory.sizes import level_bytes

TESTDATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata"
KTX2_ID = b"\xabKTX 20\xbb\r\n\x1a\n"

# The sample glTF model the glTF tests load, bake and draw.
BOX_MODEL = Path(__file__).resolve().parents[1] / "assets" / "models" / "BoxTextured"


def assert_open_refuses(path: Path, exc: type[Exception]) -> None:
    """`textures.open` refuses the file with `exc`, in a message that names the file."""
    with pytest.raises(exc) as info:
        textures.open(path)
    assert str(path) in str(info.value)


def assert_opens_whole_or_refuses(data: bytes, name: str,
                                  more: Callable[[object], None] | None = None) -> None:
    """The fuzzing oracle: a file opens with level sizes the format formula gives and every
    level readable in full (plus the checks `more` makes on the opened texture), or raises
    TextureFormatError (UnsupportedFormatError included) naming the file; nothing else."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        try:
            tex = textures.open(p)
            for lv in tex.levels:
                assert lv.image_nbytes == level_bytes(tex.pixel_format, lv.width, lv.height,
                                                      lv.depth)
                assert lv.nbytes == lv.image_nbytes * tex.layers * tex.faces
                assert len(tex.read_level_all(lv.index)) == lv.nbytes
            if more is not None:
                more(tex)
        except TextureFormatError as exc:
            assert str(p) in str(exc)


def rgba_image(w: int, h: int, seed: int = 0) -> np.ndarray:
    """Smooth gradients plus noise: exercises every block mode an encoder picks."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(1, w - 1), y * 255 // max(1, h - 1), (x ^ y) & 255,
                    255 - (x * 7 + y * 3) % 256], -1)
    img = img + rng.integers(-20, 20, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


#: Where `encode` keeps the images it made, for the run's other tests (and test processes):
#: set by conftest to a folder of this run only; None encodes every time.
ENCODED: Path | None = None


def encode(fmt: str, w: int, h: int, seed: int = 0) -> bytes:
    """One image of `fmt` (our name): etcpak blocks for BC1/3/4/5/7, random blocks otherwise.
    The same arguments give the same bytes, so each image is made once a run (BC7 encoding
    is most of the time of the tests that build textures)."""
    if ENCODED is None:
        return _encode(fmt, w, h, seed)
    path = ENCODED / f"{fmt}-{w}x{h}-{seed}.bin"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    data = _encode(fmt, w, h, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # whole or absent for a test process reading it at the same time
    return data


def _encode(fmt: str, w: int, h: int, seed: int) -> bytes:
    f = get(fmt)
    if not f.compressed:
        n = level_bytes(f, w, h)
        return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()
    pw, ph = -(-w // 4) * 4, -(-h // 4) * 4
    img = np.zeros((ph, pw, 4), np.uint8)
    img[:h, :w] = rgba_image(w, h, seed)
    raw = img.tobytes()
    family = f.family
    if family == "BC7":
        return etcpak.compress_bc7(raw, pw, ph, etcpak.BC7CompressBlockParams())
    enc = {"BC1": etcpak.compress_bc1, "BC3": etcpak.compress_bc3, "BC4": etcpak.compress_bc4,
           "BC5": etcpak.compress_bc5}.get(family)
    if enc is not None and not f.signed:
        return enc(raw, pw, ph)
    n = level_bytes(f, w, h)
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def mip_images(fmt: str, w: int, h: int, levels: int, images: int = 1) -> list[list[bytes]]:
    """[level][layer*faces + face] -> bytes of that image."""
    out = []
    for lvl in range(levels):
        lw, lh = max(1, w >> lvl), max(1, h >> lvl)
        out.append([encode(fmt, lw, lh, seed=lvl * 131 + i) for i in range(images)])
    return out


@dataclass
class Ktx2Spec:
    """Everything a KTX2 file header says, with valid defaults for a 2D texture."""

    vk_format: int
    width: int
    height: int
    levels: list[bytes]  # whole level (all layers/faces), level 0 first, uncompressed
    depth: int = 0
    layers: int = 0
    faces: int = 1
    scheme: int = 0
    level_count: int | None = None
    dfd_model: int = 1
    kvd: dict[str, bytes] = field(default_factory=dict)


def _dfd(model: int) -> bytes:
    # One basic descriptor block with no samples: enough for readers that look at the model.
    block = struct.pack("<IHH4B4B8B", 0, 2, 24, model, 1, 2, 0, 3, 3, 0, 0, *([0] * 8))
    return struct.pack("<I", 4 + len(block)) + block


def _kvd(kvd: dict[str, bytes]) -> bytes:
    out = b""
    for k, v in kvd.items():
        entry = k.encode() + b"\0" + v
        out += struct.pack("<I", len(entry)) + entry + b"\0" * (-len(entry) % 4)
    return out


def build_ktx2(spec: Ktx2Spec) -> bytes:
    """A KTX2 file: header, index, level index, DFD, KVD, levels stored smallest first."""
    stored = [_supercompress(data, spec.scheme) for data in spec.levels]
    n = len(spec.levels)
    dfd, kvd = _dfd(spec.dfd_model), _kvd(spec.kvd)
    dfd_off = 80 + 24 * n
    kvd_off = dfd_off + len(dfd)
    pos = kvd_off + len(kvd)
    offsets = [0] * n
    body = b""
    for i in reversed(range(n)):
        pad = -(pos + len(body)) % 16
        body += b"\0" * pad
        offsets[i] = pos + len(body)
        body += stored[i]
    header = KTX2_ID + struct.pack(
        "<9I", spec.vk_format, 1, spec.width, spec.height, spec.depth, spec.layers, spec.faces,
        n if spec.level_count is None else spec.level_count, spec.scheme)
    index = struct.pack("<4I2Q", dfd_off, len(dfd), kvd_off if kvd else 0, len(kvd), 0, 0)
    lvl_index = b"".join(struct.pack("<3Q", offsets[i], len(stored[i]), len(spec.levels[i]))
                         for i in range(n))
    return header + index + lvl_index + dfd + kvd + body


def _supercompress(data: bytes, scheme: int) -> bytes:
    if scheme == 2:
        return zstandard.ZstdCompressor(level=3).compress(data)
    if scheme == 3:
        return zlib.compress(data, 6)
    return data


def ktx2_for(fmt: str, w: int, h: int, levels: int = 1, layers: int = 0, faces: int = 1,
             scheme: int = 0) -> tuple[bytes, list[list[bytes]]]:
    """A valid KTX2 of our format `fmt` and the per-image payloads it holds."""
    images = mip_images(fmt, w, h, levels, max(1, layers) * faces)
    spec = Ktx2Spec(get(fmt).vk_format, w, h, [b"".join(im) for im in images], layers=layers,
                    faces=faces, scheme=scheme)
    return build_ktx2(spec), images


# --- DDS -------------------------------------------------------------------------------

DDSD_CAPS, DDSD_HEIGHT, DDSD_WIDTH, DDSD_PITCH = 0x1, 0x2, 0x4, 0x8
DDSD_PIXELFORMAT, DDSD_MIPMAPCOUNT, DDSD_LINEARSIZE, DDSD_DEPTH = 0x1000, 0x20000, 0x80000, 0x800000
DDPF_ALPHAPIXELS, DDPF_FOURCC, DDPF_RGB = 0x1, 0x4, 0x40
DDSCAPS_COMPLEX, DDSCAPS_TEXTURE, DDSCAPS_MIPMAP = 0x8, 0x1000, 0x400000
DDSCAPS2_CUBEMAP_ALLFACES = 0x200 | 0xFC00


@dataclass
class DdsSpec:
    width: int
    height: int
    payload: bytes
    mips: int = 0
    flags: int = DDSD_CAPS | DDSD_HEIGHT | DDSD_WIDTH | DDSD_PIXELFORMAT
    pitch: int = 0
    depth: int = 0
    pf_flags: int = DDPF_FOURCC
    fourcc: bytes = b"\0\0\0\0"
    bitcount: int = 0
    masks: tuple[int, int, int, int] = (0, 0, 0, 0)
    caps: int = DDSCAPS_TEXTURE
    caps2: int = 0
    dx10: tuple[int, int, int, int, int] | None = None  # dxgi, dimension, misc, arraySize, misc2


def build_dds(s: DdsSpec) -> bytes:
    header = struct.pack("<4s7I", b"DDS ", 124, s.flags, s.height, s.width, s.pitch, s.depth,
                         s.mips)
    header += b"\0" * 44
    header += struct.pack("<2I4s5I", 32, s.pf_flags, s.fourcc, s.bitcount, *s.masks)
    header += struct.pack("<5I", s.caps, s.caps2, 0, 0, 0)
    if s.dx10 is not None:
        header += struct.pack("<5I", *s.dx10)
    return header + s.payload


def dds_chain_payload(fmt: str, w: int, h: int, levels: int,
                      images: int = 1) -> tuple[bytes, list[list[bytes]]]:
    """DDS order (each layer/face a whole mip chain) and the same images as [level][image]."""
    imgs = mip_images(fmt, w, h, levels, images)
    payload = b"".join(imgs[lvl][i] for i in range(images) for lvl in range(levels))
    return payload, imgs


def mip_flags(levels: int) -> tuple[int, int]:
    """(extra dwFlags, dwCaps) a writer sets for a mip chain."""
    if levels > 1:
        return DDSD_MIPMAPCOUNT, DDSCAPS_TEXTURE | DDSCAPS_COMPLEX | DDSCAPS_MIPMAP
    return 0, DDSCAPS_TEXTURE


def texconv_dds(dxgi: int, fmt: str, w: int, h: int, levels: int = 1, array: int = 1,
                cube: bool = False) -> tuple[bytes, list[list[bytes]]]:
    """DirectXTex texconv: DX10 header, DDSD_LINEARSIZE with the real top-level size,
    DDSD_MIPMAPCOUNT always set (even for 1 level), cube maps flagged in both headers."""
    faces = 6 if cube else 1
    payload, imgs = dds_chain_payload(fmt, w, h, levels, array * faces)
    _, caps = mip_flags(levels)
    spec = DdsSpec(w, h, payload, mips=levels, pitch=level_bytes(get(fmt), w, h),
                   flags=DDSD_CAPS | DDSD_HEIGHT | DDSD_WIDTH | DDSD_PIXELFORMAT
                   | DDSD_MIPMAPCOUNT | DDSD_LINEARSIZE, fourcc=b"DX10", caps=caps,
                   caps2=DDSCAPS2_CUBEMAP_ALLFACES if cube else 0,
                   dx10=(dxgi, 3, 0x4 if cube else 0, array, 0))
    return build_dds(spec), imgs


def legacy_dds(fourcc: bytes, fmt: str, w: int, h: int, levels: int = 1, cube: bool = False,
               pitch: int | None = None) -> tuple[bytes, list[list[bytes]]]:
    """NVTT / ImageMagick style: FourCC pixel format, DDSD_LINEARSIZE (ImageMagick writes the
    top-level size; some writers write 0 or garbage), DDSD_MIPMAPCOUNT only with mips."""
    faces = 6 if cube else 1
    payload, imgs = dds_chain_payload(fmt, w, h, levels, faces)
    mflag, caps = mip_flags(levels)
    spec = DdsSpec(w, h, payload, mips=levels if levels > 1 else 0,
                   pitch=level_bytes(get(fmt), w, h) if pitch is None else pitch,
                   flags=DDSD_CAPS | DDSD_HEIGHT | DDSD_WIDTH | DDSD_PIXELFORMAT
                   | DDSD_LINEARSIZE | mflag, fourcc=fourcc, caps=caps | (DDSCAPS_COMPLEX
                                                                         if cube else 0),
                   caps2=DDSCAPS2_CUBEMAP_ALLFACES if cube else 0)
    return build_dds(spec), imgs
