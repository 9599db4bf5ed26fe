"""The compute-shader BC1/BC7 encoder (engine.gl.bc_encode) and its band policy
(engine.textures.bands): valid blocks (decoded by texture2ddecoder), quality within a stated
margin of etcpak on photographs, banded encodes identical to one-shot ones, typed errors."""
from __future__ import annotations

import numpy as np
import pytest
import texture2ddecoder

from engine import assets
from engine.errors import UsageError
from engine.textures import bands
from engine.textures.bake import load_rgba
from engine.textures.decode import decode_image
from engine.textures.encode import encode_image, pad_to_blocks

#: How far below etcpak's PSNR (RGB, level 0) the GPU encoder may fall on the photographs'
#: crops. Both encoders are better than etcpak's there (BC1: principal axis and refits
#: against etcpak's fast BC1; BC7: modes 6 and 1 against etcpak's with the opaque-alpha
#: refit), so the margin only allows for a crop where they tie.
BC1_MARGIN_DB = 0.5
BC7_MARGIN_DB = 0.5


def _t2d(fmt: str, data: bytes, w: int, h: int) -> np.ndarray:
    """texture2ddecoder's decode (BGRA) as (H, W, 4) RGBA."""
    fn = texture2ddecoder.decode_bc7 if fmt.startswith("BC7") else texture2ddecoder.decode_bc1
    out = np.frombuffer(fn(data, w, h), np.uint8).reshape(h, w, 4)
    return out[..., [2, 1, 0, 3]]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = ((a[..., :3].astype(np.float64) - b[..., :3]) ** 2).mean()
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


@pytest.fixture(scope="module")
def encoder(dev):
    from engine.gl.bc_encode import GpuBlockEncoder

    if dev.caps.version_code < 430:
        pytest.skip("compute shaders need GL 4.3")
    enc = GpuBlockEncoder(dev)
    for family in ("BC1", "BC7"):
        enc.program(family)  # compiled once; each test's own objects are leak-checked
    yield enc
    enc.release()


@pytest.fixture
def gpu(encoder, dev):
    with dev.leak_check():
        yield encoder


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    return {p.stem: load_rgba(p) for p in sorted(assets.PHOTOS.glob("*.jpg"))}


@pytest.mark.parametrize("size", [64, 256])
@pytest.mark.parametrize("fmt,margin", [("BC1_RGB", BC1_MARGIN_DB), ("BC7", BC7_MARGIN_DB)])
def test_valid_blocks_near_etcpak(gpu, photos, fmt, margin, size):
    assert photos, "the photo assets are missing"
    for name, full in photos.items():
        img = np.ascontiguousarray(full[:size, :size])
        h, w = img.shape[:2]
        data = gpu.encode(img, fmt)
        assert len(data) == (w // 4) * (h // 4) * (8 if fmt.startswith("BC1") else 16)
        ours = _psnr(_t2d(fmt, data, w, h), img)
        theirs = _psnr(_t2d(fmt, encode_image(img, fmt), w, h), img)
        assert ours >= theirs - margin, f"{name} {size}: {ours:.2f} dB vs etcpak {theirs:.2f}"


def test_bc7_opaque_decodes_alpha_255_and_alpha_kept(gpu, photos):
    img = np.ascontiguousarray(photos["coffee"][:64, :64])
    decoded = _t2d("BC7", gpu.encode(img, "BC7"), 64, 64)
    assert (decoded[..., 3] == 255).all()
    ramp = img.copy()
    ramp[..., 3] = np.linspace(0, 255, 64, dtype=np.uint8)[None, :]
    decoded = _t2d("BC7", gpu.encode(ramp, "BC7"), 64, 64)
    assert np.abs(decoded[..., 3].astype(int) - ramp[..., 3]).max() <= 4


def test_bc1_punch_through(gpu, photos):
    img = np.ascontiguousarray(photos["chelsea"][:64, :64])
    img[..., 3] = 255
    img[8:40, 12:30, 3] = 0  # a hole across block edges
    img[0:4, 60:64, 3] = 0  # a whole block transparent
    data = gpu.encode(img, "BC1_RGBA")
    # texture2ddecoder reads index 3 of a 3-colour block as opaque black; the engine's
    # decoder (what the GPU samples) as transparent black
    hole = img[..., 3] < 128
    assert (_t2d("BC1_RGBA", data, 64, 64)[hole][:, :3] == 0).all()
    decoded = decode_image("BC1_RGBA", data, 64, 64)
    assert ((decoded[..., 3] == 0) == hole).all()
    opaque = ~hole
    assert _psnr(decoded[opaque][None], img[opaque][None]) > 28.0


def test_banded_encode_equals_one_shot(gpu, photos):
    img = np.ascontiguousarray(photos["astronaut"][:256, :200])
    from engine.textures.mipgen import generate_mips

    levels = generate_mips(img)
    for fmt in ("BC1_RGB", "BC7"):
        whole = gpu.encode_chain(levels, fmt)
        job = gpu.start(levels, fmt)
        try:
            calls = 0
            while not job.step(1e-6):  # every call does its one smallest band
                calls += 1
            assert calls > 1 and job.dispatches > len(levels)
            assert job.result() == whole
        finally:
            job.release()


def test_padding_matches_edge_padded_input(gpu, photos):
    img = np.ascontiguousarray(photos["coffee"][:37, :23])  # not multiples of 4
    for fmt in ("BC1_RGB", "BC7"):
        data = gpu.encode(img, fmt)
        assert len(data) == 10 * 6 * (8 if fmt == "BC1_RGB" else 16)
        assert data == gpu.encode(pad_to_blocks(img), fmt)
        assert _psnr(_t2d(fmt, data, 24, 40)[:37, :23], img) > 30.0


def test_gpu_mips_and_srgb_level0(gpu, photos):
    img = np.ascontiguousarray(photos["chelsea"][:64, :48])
    for fmt in ("BC7_SRGB", "BC1_RGB"):
        levels = gpu.encode_mipmapped(img, fmt)
        assert len(levels) == 7  # 64x48 down to 1x1
        assert levels[0] == gpu.encode(img, fmt)  # the sRGB texture gives the bytes back
        assert len(levels[-1]) == (16 if fmt.startswith("BC7") else 8)


@pytest.mark.needs("BC7 sampling")
def test_upload_into_compressed_texture(gpu, dev, photos):
    img = np.ascontiguousarray(photos["astronaut"][:32, :32])
    tex = dev.storage_texture("BC7", 32, 32, label="gpu-encode-target")
    job = gpu.start([img], "BC7")
    try:
        job.run()
        job.upload_into(tex)
        assert dev.commands.read_level(tex, 0) == job.result()[0]
    finally:
        job.release()
        dev.release(tex)


def test_start_texture_encodes_a_callers_texture(gpu, dev, photos):
    img = np.ascontiguousarray(photos["coffee"][:16, :16])
    tex = dev.texture((16, 16), 4, img.tobytes(), label="gpu-encode-caller")
    job = gpu.start_texture(tex, "BC1_RGB")
    try:
        job.run()
        assert job.result()[0] == gpu.encode(img, "BC1_RGB")
    finally:
        job.release()
        dev.release(tex)


def test_job_memory_is_ledgered_as_staging(gpu, dev):
    """The source texture (with its mips) and the block buffer are in the ledger while the
    job lives, as staging memory, and leave it on release."""
    before = dev.ledger.category_total("staging")
    job = gpu.start_mipmapped(np.zeros((64, 32, 4), np.uint8), "BC7")
    try:
        blocks = sum(16 * lv.blocks for lv in job.levels)
        texels = sum(4 * w * h for w, h in (((64 >> i) or 1, (32 >> i) or 1)
                                             for i in range(len(job.levels))))
        assert dev.ledger.category_total("staging") - before == blocks + texels
    finally:
        job.release()
    assert dev.ledger.category_total("staging") == before


@pytest.mark.parametrize("bad,match", [
    (np.zeros((0, 8, 4), np.uint8), "no texels"),
    (np.zeros((8, 8, 3), np.uint8), "RGBA"),
    (np.zeros((8, 8, 4), np.float32), "uint8"),
    ("not an image", "RGBA"),
])
def test_bad_images_are_usage_errors(gpu, bad, match):
    with pytest.raises(UsageError, match=match):
        gpu.encode(bad, "BC7")


def test_absurd_size_format_and_chain_are_usage_errors(gpu, dev):
    wide = np.zeros((1, dev.caps.max_texture_size + 1, 4), np.uint8)
    with pytest.raises(UsageError, match="texture limit"):
        gpu.encode(wide, "BC1_RGB")
    with pytest.raises(UsageError, match="BC3"):
        gpu.encode(np.zeros((4, 4, 4), np.uint8), "BC3")
    level0, wrong = np.zeros((16, 16, 4), np.uint8), np.zeros((4, 4, 4), np.uint8)
    with pytest.raises(UsageError, match="level 1"):
        gpu.start([level0, wrong], "BC7")
    with pytest.raises(UsageError, match="no levels"):
        gpu.start([], "BC7")
    job = gpu.start([level0], "BC7")
    try:
        with pytest.raises(UsageError, match="still to encode"):
            job.result()
    finally:
        job.release()


@pytest.mark.needs("BC7 sampling")
def test_bc7_partition_tables_match_the_decoders(dev):
    """The shader's mode-1 partition and anchor tables, read back from texture2ddecoder and
    from the GL driver's own BC7 decoder: one probe block per partition with subset 0 black
    and subset 1 white shows each texel's subset; one with every index 1, parsed as if the
    shader's anchor were right, decodes to one colour only when it is."""
    import re

    from engine.gl.shaders import load

    src = load("bc7_partitions.glsl")
    masks = [int(m, 16) for m in re.findall(r"0x([0-9A-F]{4})u", src)]
    anchors = [int(a) for a in re.search(r"ANCHOR2\[64\] = int\[64\]\(([^)]*)\)",
                                         src).group(1).split(",")]
    assert len(masks) == len(anchors) == 64

    def probe(p: int, ends: tuple[int, ...], index: int) -> bytes:
        fields = [(2, 2), (p, 6)] + [(e, 6) for _ in range(3) for e in ends] + [(0, 1)] * 2
        fields += [(index, 2 if t in (0, anchors[p]) else 3) for t in range(16)]
        value, pos = 0, 0
        for v, n in fields:
            value, pos = value | (v << pos), pos + n
        assert pos == 128
        return value.to_bytes(16, "little")

    blocks = [probe(p, (0, 0, 63, 63), 0) for p in range(64)]
    blocks += [probe(p, (0, 63, 0, 63), 1) for p in range(64)]
    data = b"".join(blocks)
    t2d = _t2d("BC7", data, 4 * 128, 4)
    tex = dev.storage_texture("BC7", 4 * 128, 4, label="partition-probe")
    try:
        dev.commands.upload(tex, 0, data)
        gl = np.frombuffer(dev.commands.read_level(tex, 0, rgba8=True), np.uint8).reshape(4, 512, 4)
    finally:
        dev.release(tex)
    for decoded in (t2d, gl):
        texels = decoded[..., 0].reshape(4, 128, 4).transpose(1, 0, 2).reshape(128, 16)
        for p in range(64):
            subsets = sum(int(texels[p, t] > 128) << t for t in range(16))
            assert subsets == masks[p], f"partition {p}"
            assert len(set(texels[64 + p].tolist())) == 1, f"anchor of partition {p}"


@pytest.mark.needs("BC7 sampling")
def test_gl_driver_decodes_what_texture2ddecoder_does(gpu, dev, photos):
    img = np.ascontiguousarray(photos["chelsea"][:64, :64])
    for fmt in ("BC7", "BC1_RGB"):
        data = gpu.encode(img, fmt)
        tex = dev.storage_texture(fmt, 64, 64, label="decode-check")
        try:
            dev.commands.upload(tex, 0, data)
            gl = np.frombuffer(dev.commands.read_level(tex, 0, rgba8=True), np.uint8).reshape(64, 64, 4)
        finally:
            dev.release(tex)
        assert np.abs(gl.astype(int) - _t2d(fmt, data, 64, 64)).max() <= 1, fmt


# -- the band policy, without GL ---------------------------------------------------------------
def test_planner_probes_then_fills_the_budget():
    p = bands.BandPlanner()
    assert p.band(0.004, 10_000, first=True) == bands.PROBE_BLOCKS
    p.measured(256, 0.001)  # 256k blocks/s: 4 ms hold 1024 blocks, a band takes a share
    assert p.band(0.004, 10_000, first=False) == int(1024 * bands.BAND_SHARE)
    assert p.band(0.004, 100, first=False) == 100  # never more than what remains
    assert p.band(0.0002, 10_000, first=False) == 0  # less than MIN_BAND fits: stop
    assert p.band(0.0001, 10_000, first=True) == bands.MIN_BAND  # a call always progresses
    p.measured(256, 0.002)
    assert p.rate == pytest.approx(bands.SMOOTHING * 128_000 + (1 - bands.SMOOTHING) * 256_000)


def test_split_crosses_levels():
    segs = bands.split([100, 25, 6, 1], (0, 90), 30)
    assert segs == [bands.Segment(0, 90, 10), bands.Segment(1, 0, 20)]
    assert bands.split([100, 25], (1, 20), 50) == [bands.Segment(1, 20, 5)]
    assert bands.blocks_of(37, 23) == (10, 6)


# -- the bake's --encoder gpu path ---------------------------------------------------------------
def test_bake_many_with_the_gpu_chain_encoder(gpu, photos, tmp_path):
    from engine.textures.bake import bake_many
    from engine.textures.ktx2 import open_ktx2

    img = np.ascontiguousarray(photos["coffee"][:64, :96])
    declined = []

    def too_big(levels, fmt):  # what the GPU encoder raises over its texture limit
        declined.append(fmt)
        raise UsageError("over the limit")

    [ours] = bake_many([("photo", img)], tmp_path / "gpu", "bc7", jobs=1, progress=False,
                       encode_chain=gpu.encode_chain)
    [cpu] = bake_many([("photo", img)], tmp_path / "cpu", "bc7", jobs=1, progress=False,
                      encode_chain=too_big)
    assert declined == ["BC7_SRGB"]  # declined: encoded on the pool instead
    assert ours.levels == cpu.levels == 7 and ours.format == cpu.format == "BC7_SRGB"
    assert ours.psnr_db >= cpu.psnr_db - BC7_MARGIN_DB
    assert open_ktx2(ours.output).read_level(0) == gpu.encode(img, "BC7_SRGB")


def test_bake_cli_refuses_gpu_for_other_formats(tmp_path, capsys):
    from engine.cli import main as cli_main

    src = assets.PHOTOS / "chelsea.jpg"
    assert cli_main(["bake", str(src), "-o", str(tmp_path / "o"), "--encoder", "gpu",
                      "--format", "bc3"]) == 2
    assert "bc3" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
