"""The KTX2 writer, checked field by field against the KTX 2.0 / Khronos Data Format specs
by parsing the bytes here, then read back through engine.textures.open."""
from __future__ import annotations

import itertools
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
import engine.textures
from engine.formats import get
from engine.memory.sizes import level_bytes, mip_count, mip_dims
from engine.textures.ktx2_write import (
    KTX2_IDENTIFIER,
    data_format_descriptor,
    write_ktx2,
)


def _levels(fmt: str, w: int, h: int, count: int | None = None, images: int = 1) -> list[bytes]:
    rng = np.random.default_rng(w * 1000 + h)
    n = count or mip_count(w, h)
    return [rng.integers(0, 256, level_bytes(fmt, *mip_dims(w, h, i)) * images, np.uint8).tobytes()
            for i in range(n)]


def _parse(path: Path) -> dict:
    raw = path.read_bytes()
    assert raw[:12] == KTX2_IDENTIFIER
    (vk, type_size, w, h, d, layers, faces, nlev, scheme) = struct.unpack_from("<9I", raw, 12)
    dfd_off, dfd_len, kvd_off, kvd_len, sgd_off, sgd_len = struct.unpack_from("<IIIIQQ", raw, 48)
    index = [struct.unpack_from("<QQQ", raw, 80 + 24 * i) for i in range(nlev)]
    return {"raw": raw, "vk": vk, "type_size": type_size, "w": w, "h": h, "d": d, "layers": layers, "faces": faces,
                "nlev": nlev, "scheme": scheme, "dfd": (dfd_off, dfd_len), "kvd": (kvd_off, kvd_len),
                "sgd": (sgd_off, sgd_len), "index": index}


def _kvd(raw: bytes, off: int, length: int) -> list[tuple[str, str]]:
    entries, pos = [], off
    while pos < off + length:
        (n,) = struct.unpack_from("<I", raw, pos)
        body = raw[pos + 4:pos + 4 + n]
        key, _, value = body.partition(b"\0")
        assert value.endswith(b"\0"), "string values are NUL terminated"
        entries.append((key.decode(), value[:-1].decode()))
        pos += 4 + n
        assert raw[pos:pos + (-pos % 4)] == b"\0" * (-pos % 4)
        pos += -pos % 4
    assert pos == off + length
    return entries


def test_header_index_and_level_layout(tmp_path: Path) -> None:
    fmt, w, h = "BC7_SRGB", 37, 19
    levels = _levels(fmt, w, h)
    path = tmp_path / "t.ktx2"
    size = write_ktx2(path, fmt, w, h, levels)
    p = _parse(path)
    assert size == len(p["raw"])
    assert (p["vk"], p["type_size"], p["w"], p["h"], p["d"]) == (146, 1, 37, 19, 0)
    assert (p["layers"], p["faces"], p["nlev"], p["scheme"]) == (0, 1, 6, 0)
    assert p["sgd"] == (0, 0)
    assert p["dfd"][0] == 80 + 24 * 6
    assert p["kvd"][0] == p["dfd"][0] + p["dfd"][1]
    offsets = [off for off, _, _ in p["index"]]
    assert offsets == sorted(offsets, reverse=True), "smallest level stored first"
    assert offsets[-1] >= p["kvd"][0] + p["kvd"][1]
    for i, (off, length, ulength) in enumerate(p["index"]):
        assert off % math.lcm(16, 4) == 0
        assert length == ulength == level_bytes(fmt, *mip_dims(w, h, i))
        assert p["raw"][off:off + length] == levels[i]
    assert p["index"][0][0] + p["index"][0][1] == size


@pytest.mark.parametrize("fmt,align", [("BC1_RGB", 8), ("BC4", 8), ("BC5", 16), ("RGBA8", 4)])
def test_levels_aligned_to_lcm_of_block_size_and_4(tmp_path: Path, fmt: str, align: int) -> None:
    path = tmp_path / "a.ktx2"
    write_ktx2(path, fmt, 13, 7, _levels(fmt, 13, 7))
    for off, _, _ in _parse(path)["index"]:
        assert off % align == 0


def test_key_value_data_sorted_nul_terminated_padded(tmp_path: Path) -> None:
    path = tmp_path / "kv.ktx2"
    write_ktx2(path, "BC1_RGB", 8, 8, _levels("BC1_RGB", 8, 8), kv={"myKey": "x", "KTXwriter": "w"})
    p = _parse(path)
    entries = _kvd(p["raw"], *p["kvd"])
    assert [k for k, _ in entries] == sorted(k for k, _ in entries)
    d = dict(entries)
    assert d["KTXorientation"] == "rd"
    assert d["KTXwriter"] == "w" and d["myKey"] == "x"
    assert p["kvd"][1] % 4 == 0


def test_default_writer_names_the_engine(tmp_path: Path) -> None:
    path = tmp_path / "w.ktx2"
    write_ktx2(path, "BC4", 4, 4, _levels("BC4", 4, 4))
    p = _parse(path)
    assert dict(_kvd(p["raw"], *p["kvd"]))["KTXwriter"] == f"engine {engine.__version__}"


def _dfd_fields(fmt: str) -> dict:
    dfd = data_format_descriptor(fmt)
    total, = struct.unpack_from("<I", dfd, 0)
    w = struct.unpack_from("<6I", dfd, 4)
    n = (total - 28) // 16
    samples = [struct.unpack_from("<IIII", dfd, 28 + 16 * i) for i in range(n)]
    return {
        "total": total, "vendor": w[0] & 0x1FFFF, "dtype": w[0] >> 17, "version": w[1] & 0xFFFF,
        "block_size": w[1] >> 16, "model": w[2] & 0xFF, "primaries": (w[2] >> 8) & 0xFF,
        "transfer": (w[2] >> 16) & 0xFF, "flags": w[2] >> 24, "dims": [(w[3] >> s) & 0xFF for s in (0, 8, 16, 24)],
        "bytes0": w[4] & 0xFF,
        "samples": [{"offset": s[0] & 0xFFFF, "bits": ((s[0] >> 16) & 0xFF) + 1, "channel": (s[0] >> 24) & 0xF,
                      "qual": (s[0] >> 24) & 0xF0, "lower": s[2], "upper": s[3]} for s in samples]}


@pytest.mark.parametrize("fmt,model,transfer,samples", [
    ("BC1_RGB", 128, 1, [(0, 64, 0, 0)]),
    ("BC1_RGBA_SRGB", 128, 2, [(0, 64, 1, 0)]),
    ("BC3_SRGB", 130, 2, [(0, 64, 15, 0x10), (64, 64, 0, 0)]),
    ("BC3", 130, 1, [(0, 64, 15, 0), (64, 64, 0, 0)]),
    ("BC4", 131, 1, [(0, 64, 0, 0)]),
    ("BC4_SNORM", 131, 1, [(0, 64, 0, 0x40)]),
    ("BC5", 132, 1, [(0, 64, 0, 0), (64, 64, 1, 0)]),
    ("BC5_SNORM", 132, 1, [(0, 64, 0, 0x40), (64, 64, 1, 0x40)]),
    ("BC6H_UF", 133, 1, [(0, 128, 0, 0x80)]),
    ("BC6H_SF", 133, 1, [(0, 128, 0, 0xC0)]),
    ("BC7_SRGB", 134, 2, [(0, 128, 0, 0)]),
    ("BC7", 134, 1, [(0, 128, 0, 0)]),
])
def test_dfd_for_block_formats(fmt: str, model: int, transfer: int, samples: list) -> None:
    d = _dfd_fields(fmt)
    assert d["total"] == 28 + 16 * len(samples)
    assert d["block_size"] == 24 + 16 * len(samples)
    assert (d["vendor"], d["dtype"], d["version"]) == (0, 0, 2)
    assert (d["model"], d["primaries"], d["transfer"], d["flags"]) == (model, 1, transfer, 0)
    assert d["dims"] == [3, 3, 0, 0]
    assert d["bytes0"] == get(fmt).block_bytes
    assert [(s["offset"], s["bits"], s["channel"], s["qual"]) for s in d["samples"]] == samples
    s0 = d["samples"][0]
    if fmt.startswith("BC6H"):
        assert s0["upper"] == 0x3F800000  # 1.0f
        assert s0["lower"] == (0xBF800000 if fmt == "BC6H_SF" else 0)
    elif fmt.endswith("SNORM"):
        assert (s0["lower"], s0["upper"]) == (0x80000000, 0x7FFFFFFF)
    else:
        assert (s0["lower"], s0["upper"]) == (0, 0xFFFFFFFF)


@pytest.mark.parametrize("fmt,transfer", [("RGBA8", 1), ("RGBA8_SRGB", 2)])
def test_dfd_for_rgba8(fmt: str, transfer: int) -> None:
    d = _dfd_fields(fmt)
    assert (d["model"], d["transfer"], d["dims"], d["bytes0"]) == (1, transfer, [0, 0, 0, 0], 4)
    alpha_qual = 0x10 if fmt.endswith("SRGB") else 0
    assert [(s["offset"], s["bits"], s["channel"], s["qual"], s["upper"]) for s in d["samples"]] == [
        (0, 8, 0, 0, 255), (8, 8, 1, 0, 255), (16, 8, 2, 0, 255), (24, 8, 15, alpha_qual, 255)]


def test_dfd_bytes_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "d.ktx2"
    write_ktx2(path, "BC5", 8, 8, _levels("BC5", 8, 8))
    p = _parse(path)
    off, length = p["dfd"]
    assert p["raw"][off:off + length] == data_format_descriptor("BC5")


def test_zstd_supercompression_round_trip(tmp_path: Path) -> None:
    fmt, w, h = "BC1_RGB", 64, 32
    levels = [bytes(level_bytes(fmt, *mip_dims(w, h, i))) for i in range(mip_count(w, h))]  # compressible
    path = tmp_path / "z.ktx2"
    size = write_ktx2(path, fmt, w, h, levels, supercompression="zstd", zstd_level=3)
    p = _parse(path)
    assert p["scheme"] == 2
    dctx = zstandard.ZstdDecompressor()
    spans = []
    for i, (off, length, ulength) in enumerate(p["index"]):
        assert ulength == len(levels[i])
        assert dctx.decompress(p["raw"][off:off + length], max_output_size=ulength) == levels[i]
        spans.append((off, off + length))
    spans.sort()
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)), "no padding when supercompressed"
    assert spans[-1][1] == size
    tex = engine.textures.open(path)
    assert [tex.read_level(i) for i in range(len(levels))] == levels


def test_array_and_cube_counts(tmp_path: Path) -> None:
    path = tmp_path / "cube.ktx2"
    write_ktx2(path, "BC7", 16, 16, _levels("BC7", 16, 16, images=6), faces=6)
    p = _parse(path)
    assert (p["layers"], p["faces"]) == (0, 6)
    assert p["index"][0][1] == level_bytes("BC7", 16, 16) * 6
    path = tmp_path / "array.ktx2"
    write_ktx2(path, "BC4", 8, 8, _levels("BC4", 8, 8, count=2, images=3), layers=3)
    assert _parse(path)["layers"] == 3


@pytest.mark.parametrize("bad", [
    {"levels": []},
    {"levels": [b"\0" * 15]},
    {"supercompression": "zlib"},
])
def test_rejects_inconsistent_input(tmp_path: Path, bad: dict) -> None:
    args = {"levels": [b"\0" * 16], "supercompression": None} | bad
    with pytest.raises(ValueError):
        write_ktx2(tmp_path / "x.ktx2", "BC7", 4, 4, args["levels"], supercompression=args["supercompression"])
    assert not (tmp_path / "x.ktx2").exists()


FORMATS = ["BC1_RGB", "BC1_RGBA_SRGB", "BC3_SRGB", "BC4", "BC5", "BC7", "BC7_SRGB", "RGBA8", "RGBA8_SRGB"]


@settings(max_examples=25, deadline=None)
@given(fmt=st.sampled_from(FORMATS), w=st.integers(1, 70), h=st.integers(1, 70),
       zstd=st.booleans(), data=st.data())
def test_reader_reads_back_what_was_written(tmp_path_factory: pytest.TempPathFactory, fmt: str, w: int,
                                             h: int, zstd: bool, data: st.DataObject) -> None:
    count = data.draw(st.integers(1, mip_count(w, h)))
    levels = _levels(fmt, w, h, count)
    path = tmp_path_factory.mktemp("rt") / "r.ktx2"
    write_ktx2(path, fmt, w, h, levels, supercompression="zstd" if zstd else None)
    tex = engine.textures.open(path)
    assert tex.format == fmt
    assert (tex.width, tex.height, len(tex.levels)) == (w, h, count)
    for i, lvl in enumerate(tex.levels):
        assert (lvl.width, lvl.height) == mip_dims(w, h, i)
        assert lvl.nbytes == len(levels[i])
        assert tex.read_level(i) == levels[i]
