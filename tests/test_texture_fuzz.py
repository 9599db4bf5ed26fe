"""Mutation fuzzing of valid KTX2 and DDS files: only the engine's file errors may come out.

A mutated file either fails with TextureFormatError (UnsupportedFormatError included) or
opens with level sizes that agree with the format formula and reads every level in full.
"""
from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from texture_helpers import assert_opens_whole_or_refuses, ktx2_for, legacy_dds, texconv_dds


SEEDS = {
    "ktx2": ktx2_for("BC7", 16, 8, levels=4, layers=2)[0],
    "ktx2-cube": ktx2_for("BC1_RGBA", 8, 8, levels=4, faces=6)[0],
    "ktx2-zstd": ktx2_for("BC3", 16, 16, levels=5, scheme=2)[0],
    "ktx2-zlib": ktx2_for("RGBA8", 8, 4, levels=4, layers=3, scheme=3)[0],
    "dds-dx10": texconv_dds(98, "BC7", 16, 8, levels=4, array=2)[0],
    "dds-cube": legacy_dds(b"DXT5", "BC3", 8, 8, levels=4, cube=True)[0],
}
# Header + index region of each container, where mutations matter most.
HEAD = {"ktx2": 80 + 24 * 5, "dds": 148}
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _last_images(tex) -> None:
    for lv in tex.levels:
        assert len(tex.read_level(lv.index, tex.layers - 1, tex.faces - 1)) == lv.image_nbytes


def _check(data: bytes) -> None:
    assert_opens_whole_or_refuses(data, "fuzz.bin", _last_images)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    name = draw(st.sampled_from(sorted(SEEDS)))
    raw = bytearray(SEEDS[name])
    head = min(len(raw), HEAD[name.split("-")[0]])
    kind = draw(st.sampled_from(["truncate", "flip", "field", "tail"]))
    if kind == "truncate":
        return bytes(raw[:draw(st.integers(0, len(raw) - 1))])
    if kind == "tail":
        return bytes(raw) + draw(st.binary(min_size=1, max_size=64))
    for _ in range(draw(st.integers(1, 4))):
        if kind == "flip":
            at = draw(st.integers(0, head - 1) | st.integers(0, len(raw) - 1))
            raw[at] ^= draw(st.integers(1, 255))
        else:  # an aligned 32/64-bit header field set to an interesting value
            width = draw(st.sampled_from([4, 8]))
            at = draw(st.integers(0, (head - width) // 4)) * 4
            value = draw(st.sampled_from([0, 1, 2, 3, 5, 6, 7, 0xFF, 0x10000, 0x7FFFFFFF,
                                          0xFFFFFFFF, 1 << 40, (1 << 64) - 1])
                         | st.integers(0, 4096))
            struct.pack_into("<I" if width == 4 else "<Q", raw, at, value % (1 << 8 * width))
    return bytes(raw)


@SETTINGS
@given(mutated())
def test_mutated_files_only_raise_format_errors(data: bytes) -> None:
    _check(data)


@SETTINGS
@given(st.binary(max_size=512), st.sampled_from([b"\xabKTX 20\xbb\r\n\x1a\n", b"DDS "]))
def test_random_bytes_after_magic(tail: bytes, magic: bytes) -> None:
    _check(magic + tail)
