"""KTX2 reader: layout of levels/layers/faces, supercompression, and hostile headers."""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
import zstandard
from texture_helpers import Ktx2Spec, build_ktx2, ktx2_for

from engine import textures
from engine.errors import TextureFormatError, UnsupportedFormatError
from engine.memory.sizes import level_bytes


def _write(tmp_path: Path, data: bytes, name: str = "t.ktx2") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("fmt", ["BC1_RGBA", "BC2", "BC3_SRGB", "BC4", "BC5", "BC7", "RGBA8"])
def test_mip_chain_levels_and_bytes(tmp_path: Path, fmt: str) -> None:
    data, images = ktx2_for(fmt, 37, 20, levels=6)
    tex = textures.open(_write(tmp_path, data))
    assert (tex.container, tex.format, tex.width, tex.height, tex.depth) == ("ktx2", fmt, 37, 20, 1)
    assert (tex.layers, tex.faces, tex.is_array, tex.is_cube) == (1, 1, False, False)
    assert [(lv.width, lv.height) for lv in tex.levels] == [(37, 20), (18, 10), (9, 5), (4, 2),
                                                            (2, 1), (1, 1)]
    for lv in tex.levels:
        assert lv.image_nbytes == lv.nbytes == level_bytes(fmt, lv.width, lv.height)
        assert tex.read_level(lv.index) == images[lv.index][0]


@pytest.mark.parametrize("scheme,name", [(0, "none"), (2, "zstd"), (3, "zlib")])
def test_array_and_cube_slices(tmp_path: Path, scheme: int, name: str) -> None:
    data, images = ktx2_for("BC7", 16, 16, levels=3, layers=2, faces=6, scheme=scheme)
    tex = textures.open(_write(tmp_path, data))
    assert (tex.layers, tex.faces, tex.is_array, tex.is_cube) == (2, 6, True, True)
    assert tex.supercompression == name
    for lv in tex.levels:
        assert lv.nbytes == 12 * lv.image_nbytes
        assert tex.read_level_all(lv.index) == b"".join(images[lv.index])
        assert tex.read_level(lv.index, layer=1, face=4) == images[lv.index][6 + 4]
    if scheme:
        assert tex.levels[0].stored_nbytes < tex.levels[0].nbytes


def test_open_reads_no_level_bytes(tmp_path: Path) -> None:
    data, _ = ktx2_for("BC1_RGBA", 8, 8, levels=1)
    p = _write(tmp_path, data)
    tex = textures.open(p)
    lv = tex.levels[0]
    raw = bytearray(data)
    raw[lv.offset:lv.offset + lv.stored_nbytes] = b"\x5a" * lv.stored_nbytes
    p.write_bytes(raw)
    assert tex.read_level(0) == b"\x5a" * lv.stored_nbytes


def test_inspect_is_json(tmp_path: Path) -> None:
    data, _ = ktx2_for("BC7_SRGB", 64, 32, levels=7, scheme=2)
    info = textures.inspect(_write(tmp_path, data))
    json.dumps(info)
    assert info["format"] == "BC7_SRGB" and info["vk_format"] == 146
    assert info["supercompression"] == "zstd" and len(info["levels"]) == 7
    assert info["levels"][0]["uncompressed_bytes"] == 64 * 32


def test_level_count_zero_means_one_level(tmp_path: Path) -> None:
    spec = Ktx2Spec(145, 8, 8, [bytes(64)], level_count=0)
    assert len(textures.open(_write(tmp_path, build_ktx2(spec))).levels) == 1


def _spec(**kw: object) -> Ktx2Spec:
    base = {"vk_format": 145, "width": 8, "height": 8,
            "levels": [bytes(64), bytes(16), bytes(16), bytes(16)]}
    base.update(kw)
    return Ktx2Spec(**base)  # type: ignore[arg-type]


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    raw = bytearray(data)
    struct.pack_into(fmt, raw, offset, value)
    return bytes(raw)


HOSTILE = {
    "magic": lambda d: b"\xabKTX 11\xbb" + d[8:],
    "truncated header": lambda d: d[:50],
    "truncated level index": lambda d: d[:90],
    "truncated level data": lambda d: d[:-5],
    "width 0": lambda d: _patch(d, 20, "<I", 0),
    "width too big": lambda d: _patch(d, 20, "<I", (1 << 16) + 1),
    "too many levels": lambda d: _patch(d, 40, "<I", 5),
    "faces 3": lambda d: _patch(d, 36, "<I", 3),
    "layers absurd": lambda d: _patch(d, 32, "<I", 1 << 30),
    "scheme 7": lambda d: _patch(d, 44, "<I", 7),
    "level offset past end": lambda d: _patch(d, 80, "<Q", 1 << 40),
    "level length wrong": lambda d: _patch(d, 88, "<Q", 63),
    "uncompressed length wrong": lambda d: _patch(d, 96, "<Q", 65),
    "overlap": lambda d: _patch(d, 80 + 24, "<Q", struct.unpack_from("<Q", d, 80)[0]),
    "level over header": lambda d: _patch(d, 80, "<Q", 0),
    "dfd outside": lambda d: _patch(d, 52, "<I", 1 << 20),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_headers_raise_format_error(tmp_path: Path, case: str) -> None:
    p = _write(tmp_path, HOSTILE[case](build_ktx2(_spec())))
    with pytest.raises(TextureFormatError) as info:
        tex = textures.open(p)
        for lv in tex.levels:
            tex.read_level_all(lv.index)
    assert str(p) in str(info.value)


def _sc_file(tmp_path: Path, scheme: int, stored: bytes) -> Path:
    """A one-level 8x8 BC7 file (64 bytes declared) whose stored level is `stored`."""
    data = build_ktx2(Ktx2Spec(145, 8, 8, [bytes(64)], scheme=scheme))
    offset = struct.unpack_from("<Q", data, 80)[0]
    return _write(tmp_path, _patch(data[:offset], 88, "<Q", len(stored)) + stored)


@pytest.mark.parametrize("scheme,compress", [(2, zstandard.ZstdCompressor().compress),
                                             (3, zlib.compress)], ids=["zstd", "zlib"])
@pytest.mark.parametrize("inflated", [64 << 20, 65, 63], ids=["bomb", "one-more", "one-less"])
def test_supercompression_bounded(tmp_path: Path, scheme: int, compress, inflated: int) -> None:
    """A level that inflates to anything but its declared 64 bytes is refused."""
    p = _sc_file(tmp_path, scheme, compress(bytes(inflated)))
    tex = textures.open(p)
    with pytest.raises(TextureFormatError, match="inflates to"):
        tex.read_level(0)


@pytest.mark.parametrize("scheme", [2, 3])
def test_supercompression_garbage(tmp_path: Path, scheme: int) -> None:
    tex = textures.open(_sc_file(tmp_path, scheme, b"\x28\xb5\x2f\xfd" + b"\x55" * 40))
    with pytest.raises(TextureFormatError, match="corrupt|inflates"):
        tex.read_level(0)


def test_zstd_frame_lying_about_content_size(tmp_path: Path) -> None:
    frame = bytearray(zstandard.ZstdCompressor(write_content_size=True).compress(bytes(64)))
    # Frame header: magic(4), FHD, then the content size field; claim 2**40 bytes.
    tex = textures.open(_sc_file(tmp_path, 2, bytes(frame[:5]) + (1 << 40).to_bytes(8, "little")
                                 + bytes(frame[6:])))
    with pytest.raises(TextureFormatError):
        tex.read_level(0)


def test_basislz_uastc_astc_unsupported(tmp_path: Path) -> None:
    basis = build_ktx2(Ktx2Spec(0, 8, 8, [bytes(64)], scheme=1, dfd_model=163))
    uastc = build_ktx2(Ktx2Spec(0, 8, 8, [bytes(64)], dfd_model=166))
    astc = build_ktx2(Ktx2Spec(157, 8, 8, [bytes(64)]))
    etc = build_ktx2(Ktx2Spec(147, 8, 8, [bytes(32)]))
    from engine.textures import basis as basis_module

    cases = [(astc, "VK_FORMAT_ASTC_4x4_UNORM_BLOCK (157)"),
             (etc, "VK_FORMAT_ETC2_R8G8B8_UNORM_BLOCK (147)")]
    if not basis_module.available():  # with the transcoder they load: tests/test_basis.py
        cases += [(basis, "BasisLZ/ETC1S"), (uastc, "UASTC")]
    for data, name in cases:
        with pytest.raises(UnsupportedFormatError) as info:
            textures.open(_write(tmp_path, data))
        assert info.value.format_name == name


def test_not_found_is_format_error(tmp_path: Path) -> None:
    with pytest.raises(TextureFormatError):
        textures.open(tmp_path / "missing.ktx2")


def test_bad_level_and_layer_arguments(tmp_path: Path) -> None:
    data, _ = ktx2_for("BC7", 8, 8, levels=2)
    tex = textures.open(_write(tmp_path, data))
    for args in ((2,), (0, 1), (0, 0, 1), (-1,)):
        with pytest.raises(ValueError):
            tex.read_level(*args)


def test_read_levels_all_reads_a_plain_tail_in_one_span(tmp_path, monkeypatch):
    """A streamer registers a texture by its tail: the adjacent plain levels come from one
    read, byte for byte what reading each level gives; zstd levels are read one by one."""
    from engine.textures.container import TextureFile

    for scheme in (0, 2):  # none, zstd
        data, _ = ktx2_for("BC7", 64, 64, levels=7, scheme=scheme)
        path = tmp_path / f"t-{scheme}.ktx2"
        path.write_bytes(data)
        tf = textures.open(path)
        one_by_one = {i: tf.read_level_all(i) for i in range(3, 7)}
        spans: list[tuple[int, int]] = []
        real = TextureFile._read_span
        monkeypatch.setattr(TextureFile, "_read_span",
                            lambda self, o, n, what: spans.append((o, n)) or real(self, o, n, what))
        assert tf.read_levels_all(range(3, 7)) == one_by_one
        monkeypatch.undo()
        assert len(spans) == (1 if scheme == 0 else 4)
