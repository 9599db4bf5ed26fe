"""Round trips on llvmpipe: bake -> open -> upload -> read back, for every format the baker
writes (sRGB included), and upload -> read back for the conformance files of the formats it
cannot write (BC2, BC6H).

Two read-backs per level: the compressed blocks (must equal the file's bytes exactly) and the
driver's own decode to RGBA8 (must equal `decode_rgba` exactly: the CPU decode is held to what
the GPU samples). Against texture2ddecoder the driver agrees exactly for BC7; for BC1-BC5
texture2ddecoder rounds up to 2 off and gets BC3 colour blocks with color0 <= color1 wrong
(docs/benchmarks.md, "Driver behaviour"), which is why the engine decodes those itself.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import texture2ddecoder
from PIL import Image

import engine.textures
from engine.gl.upload import upload_texture_file
from engine.textures.bake import bake_file
from driver_needs import require

ROOT = Path(__file__).resolve().parents[1]
PHOTO = ROOT / "assets" / "photos" / "coffee.jpg"
BAKES = [("bc7", True), ("bc7", False), ("bc1", True), ("bc1", False), ("bc3", True),
         ("bc3", False), ("bc4", False), ("bc5", False)]


@pytest.fixture(scope="module")
def crop(tmp_path_factory) -> Path:
    """A 100x60 (non-multiple-of-4 levels below) crop of a real photograph."""
    out = tmp_path_factory.mktemp("rt") / "crop.png"
    Image.open(PHOTO).convert("RGBA").crop((200, 120, 300, 180)).save(out)
    return out


def gpu_round_trip(device, tf) -> None:
    tex = upload_texture_file(device, tf, label=f"rt-{tf.format}")
    try:
        assert tex.fmt is tf.pixel_format  # uploaded compressed, not CPU-decoded
        for level in range(len(tf.levels)):
            lv = tf.levels[level]
            face_data = device.commands.read_level(tex, level)
            assert face_data == tf.read_level_all(level)[: len(face_data)], level
            if tf.pixel_format.signed:
                continue  # an unsigned read-back clamps SNORM; test_decode_gpu maps it
            gpu = np.frombuffer(device.commands.read_level(tex, level, rgba8=True), np.uint8)
            gpu = gpu.reshape(-1, lv.width, 4)[: lv.height]
            cpu = engine.textures.decode_rgba(tf, level)
            assert np.array_equal(gpu, cpu), (tf.format, level,
                                              int(np.abs(gpu.astype(int) - cpu).max()))
    finally:
        device.release(tex)


@pytest.mark.parametrize("fmt,srgb", BAKES, ids=[f"{f}-{'srgb' if s else 'linear'}"
                                                 for f, s in BAKES])
def test_bake_open_upload_read_back(device, crop, tmp_path, fmt, srgb):
    result = bake_file(crop, tmp_path, fmt=fmt, srgb=srgb)
    tf = engine.textures.open(result.output)
    require(device, f"{tf.format} sampling")
    assert tf.pixel_format.srgb == (srgb and fmt not in ("bc4", "bc5"))
    gpu_round_trip(device, tf)
    if fmt == "bc7":  # the library decoder agrees with the driver exactly for BC7
        lv = tf.levels[0]
        pw, ph = -(-lv.width // 4) * 4, -(-lv.height // 4) * 4
        bgra = np.frombuffer(texture2ddecoder.decode_bc7(tf.read_level(0), pw, ph), np.uint8)
        ref = bgra.reshape(ph, pw, 4)[: lv.height, : lv.width, [2, 1, 0, 3]]
        assert np.array_equal(ref, engine.textures.decode_rgba(tf, 0))


def test_every_conformance_bcn_file_round_trips(device, testdata):
    """All of ktx2-cts/bcn (arrays, cube maps, BC2 and BC6H included): what the GPU holds and
    samples equals the file and the CPU decode."""
    files = sorted((testdata / "ktx2-cts" / "bcn").glob("*.ktx2"))
    assert files
    formats = set()
    for path in files:
        tf = engine.textures.open(path)
        if tf.format == "BC6H_SF":
            continue  # no CPU decoder for signed BC6H (texture2ddecoder lacks it)
        if not device.caps.can_sample(tf.pixel_format):
            continue  # served as another format: test_drivers.py compares those pictures
        formats.add(tf.pixel_format.family)
        gpu_round_trip(device, tf)
    assert set(device.caps.compressed_families) <= formats
