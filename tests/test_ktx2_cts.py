"""The Khronos KTX-Software CTS files (../shared/testdata/ktx2-cts): one test per file.

bcn/: loads, level sizes match, decode matches texture2ddecoder where it is the reference.
supercompressed/ and rgba8/: formats in engine/formats.py load and every level inflates to
its declared size; anything else is UnsupportedFormatError. unsupported/: UnsupportedFormatError.
invalid/: either loads and reads every level, or TextureFormatError; nothing else.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import texture2ddecoder
from texture_helpers import TESTDATA

from engine import textures
from engine.errors import TextureFormatError, UnsupportedFormatError
from engine.formats import BY_VK
from engine.memory.sizes import level_bytes

CTS = TESTDATA / "ktx2-cts"


def _files(folder: str) -> list[Path]:
    d = CTS / folder
    return sorted(d.glob("*.ktx2")) if d.is_dir() else []


def _params(folder: str) -> list:
    files = _files(folder)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no CTS data in {CTS}"))]
    return [pytest.param(f, id=f.name) for f in files]


def _check_levels(tex: textures.TextureFile) -> None:
    for lv in tex.levels:
        assert lv.image_nbytes == level_bytes(tex.pixel_format, lv.width, lv.height, lv.depth)
        assert lv.nbytes == lv.image_nbytes * tex.layers * tex.faces
        assert len(tex.read_level_all(lv.index)) == lv.nbytes


# texture2ddecoder is a reference only where it follows GL: not BC1_RGBA punch-through,
# not BC3 blocks with color0 <= color1, not signed RGTC, and its BC1-BC5 palette rounding
# differs from llvmpipe's by up to 2 (see engine/textures/bcn.py): BC6H/BC7 must be exact.
_T2D = {"BC1": texture2ddecoder.decode_bc1, "BC4": texture2ddecoder.decode_bc4,
        "BC5": texture2ddecoder.decode_bc5, "BC6H": texture2ddecoder.decode_bc6,
        "BC7": texture2ddecoder.decode_bc7}


@pytest.mark.parametrize("path", _params("bcn"))
def test_bcn(path: Path) -> None:
    tex = textures.open(path)
    assert tex.pixel_format.family in ("BC1", "BC2", "BC3", "BC4", "BC5", "BC6H", "BC7")
    _check_levels(tex)
    ref = _T2D.get(tex.pixel_format.family)
    if ref is None or tex.pixel_format.signed:
        return
    w, h = tex.levels[0].width, tex.levels[0].height
    ours = textures.decode_rgba(tex)
    theirs = np.frombuffer(ref(tex.read_level(0), w, h), np.uint8).reshape(h, w, 4)
    theirs = theirs[..., [2, 1, 0, 3]]
    if tex.format.startswith("BC1_RGBA"):
        ours, theirs = ours[..., :3], theirs[..., :3]
    tolerance = 0 if tex.pixel_format.family in ("BC6H", "BC7") else 2
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= tolerance


@pytest.mark.parametrize("path", _params("supercompressed") + _params("rgba8"))
def test_supported_or_unsupported(path: Path) -> None:
    vk = struct.unpack_from("<I", path.read_bytes(), 12)[0]
    if vk not in BY_VK:
        with pytest.raises(UnsupportedFormatError):
            textures.open(path)
        return
    tex = textures.open(path)
    _check_levels(tex)


@pytest.mark.parametrize("path", _params("unsupported"))
def test_unsupported(path: Path) -> None:
    from engine.textures import basis

    if "UASTC" in path.name and basis.available():  # transcoded: tests/test_basis.py
        tex = textures.open(path)
        _check_levels(tex)
        return
    with pytest.raises(UnsupportedFormatError) as info:
        textures.open(path)
    name = info.value.format_name
    assert "UASTC" in name or "ASTC_4x4_SRGB" in name, name


@pytest.mark.parametrize("path", _params("invalid"))
def test_invalid(path: Path) -> None:
    try:
        tex = textures.open(path)
        _check_levels(tex)
    except TextureFormatError as exc:
        assert str(path) in str(exc)
