"""BC4 tiles of scientific images, asked for with `encoding="bc4"`: the encoder against the
format's definition and an independent decoder, the driver's decode and size of the cache,
pictures against a numpy reference of the decoded values, exact picks, a quarter of the
uint16 cache's bytes, and a cache that grows keeping its tiles."""
from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from science_helpers import (
    picture_difference,
    pyramid,
    reference,
    sample,
    settled_stops,
    write_ome_zarr,
)

from engine.errors import UsageError
from engine.science.bc4 import decode_tile, encode_tile, pitch_for
from engine.science.gpu import slot_bytes
from engine.science.view import ScienceView

SIZE = (200, 150)


def _error_bound(values: np.ndarray, tile) -> float:
    """Half a step of the eight between a block's endpoints (its range in 255ths of the
    tile's span, widened by the endpoints' rounding to whole 255ths), in values."""
    h, w = values.shape
    worst = 0.0
    for y in range(0, h, 4):
        for x in range(0, w, 4):
            b = values[y:y + 4, x:x + 4].astype(np.float64)
            b = b[np.isfinite(b)]
            if b.size:
                worst = max(worst, float(b.max() - b.min()))
    return (worst / tile.span * 255 + 2) / 14 / 255 * tile.span * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("shape", [(256, 256), (100, 37), (4, 4), (1, 1)])
def test_a_smooth_tile_decodes_within_half_a_step_of_its_blocks(shape):
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    values = (1000 + 9 * xx + 4 * yy).astype(np.uint16)
    tile = encode_tile(values, pitch_for(256))
    got = decode_tile(tile, 256)[:shape[0], :shape[1]]
    assert np.abs(got - values).max() <= _error_bound(values, tile)
    assert len(tile.data) == slot_bytes(np.uint16, 256, "bc4") == 256 * 256 // 2


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.sampled_from(["uint16", "float32", "uint8"]),
       st.integers(0, 2**32 - 1))
def test_any_tile_decodes_within_half_a_step_of_its_blocks(h, w, dtype, seed):
    rng = np.random.default_rng(seed)
    scale = float(np.iinfo(dtype).max) if dtype != "float32" else 1e4
    values = (rng.random((h, w)) ** rng.integers(1, 4) * scale).astype(dtype)
    tile = encode_tile(values, pitch_for(40))
    got = decode_tile(tile, pitch_for(40))[:h, :w]
    assert np.abs(got - values.astype(np.float64)).max() <= _error_bound(values, tile)


def test_non_finite_values_are_stored_as_the_minimum_and_a_constant_tile_is_exact():
    v = np.array([[1.0, np.nan], [np.inf, 3.0]], np.float32)
    tile = encode_tile(v, 4)
    got = decode_tile(tile, 4)[:2, :2]
    assert (tile.low, tile.span) == (1.0, 2.0)
    assert got[0, 1] == got[1, 0] == 1.0 and got[0, 0] == 1.0 and got[1, 1] == 3.0
    flat = encode_tile(np.full((8, 8), 517, np.uint16), 8)
    assert np.array_equal(decode_tile(flat, 8), np.full((8, 8), 517.0))
    assert (decode_tile(encode_tile(np.full((4, 4), np.nan), 4), 4) == 0).all()


def test_bad_tiles_are_refused():
    for values, pitch in ((np.zeros((9, 4)), 8), (np.zeros((4, 4)), 6), (np.zeros((0, 4)), 8)):
        with pytest.raises(ValueError):
            encode_tile(values, pitch)
    with pytest.raises(ValueError):
        decode_tile(encode_tile(np.zeros((4, 4)), 4), 8)


def test_the_block_layout_is_what_an_independent_decoder_reads():
    decoder = pytest.importorskip("texture2ddecoder")
    rng = np.random.default_rng(3)
    values = rng.integers(0, 65535, (64, 64)).astype(np.uint16)
    tile = encode_tile(values, 64)
    bgra = np.frombuffer(decoder.decode_bc4(tile.data, 64, 64), np.uint8).reshape(64, 64, 4)
    ours = (decode_tile(tile, 64) - tile.low) / tile.span * 255
    assert np.abs(bgra[..., 2] - ours).max() < 1  # it truncates to 8 bits


# ---------------------------------------------------------------------------- on the GPU
@pytest.fixture(scope="module")
def source(tmp_path_factory):
    pytest.importorskip("zarr")
    rng = np.random.default_rng(11)
    levels = pyramid(sample(rng, "uint16", (2, 512, 640)), 3)
    return write_ome_zarr(tmp_path_factory.mktemp("bc4") / "a.zarr", levels, 3), levels


def _decoded(levels: list[np.ndarray], tile: int) -> list[np.ndarray]:
    """The levels as their BC4 tiles decode (tile by tile, as the view keeps them)."""
    pitch, out = pitch_for(tile), []
    for lv in levels:
        d = np.zeros(lv.shape)
        for c in range(lv.shape[0]):
            for y in range(0, lv.shape[1], tile):
                for x in range(0, lv.shape[2], tile):
                    part = lv[c, y:y + tile, x:x + tile]
                    d[c, y:y + tile, x:x + tile] = decode_tile(
                        encode_tile(part, pitch), pitch)[:part.shape[0], :part.shape[1]]
        out.append(d)
    return out


def _check_picture(view, decoded, stats):
    """Equal to the numpy picture of the decoded values, up to float rounding at texel edges
    and a LUT entry at an entry's edge (as the exact views' pictures)."""
    diff = picture_difference(view, decoded, stats.level)
    assert np.mean(diff > 4) < 0.001, np.mean(diff > 4)


@contextlib.contextmanager
def _viewing(dev, location, **kw):
    with dev.leak_check():
        view = ScienceView(str(location), dev, size=SIZE, encoding="bc4",
                           **{"budget": 32 << 20, **kw})
        try:
            yield view
        finally:
            view.release()


def test_bc4_views_equal_the_decoded_source_and_picks_stay_exact(dev, source):
    location, levels = source
    with _viewing(dev, location) as view:
        decoded = _decoded(levels, view.source.tile)
        for stats in settled_stops(view, levels):
            _check_picture(view, decoded, stats)
            for x, y in ((37, 91), (150, 20), (100, 60)):
                got = view.pick(x, y)
                assert np.array_equal(np.array(got.values), levels[0][:, got.y, got.x])
        # lossy, as asked: the exact picture differs
        exact = reference(levels, stats.level, view.viewport, view.displays).astype(np.int32)
        assert np.mean(np.abs(view.picture().astype(np.int32) - exact).max(axis=2) > 4) > 0.01


def test_the_driver_holds_and_decodes_the_slots_as_uploaded(dev, source):
    location, levels = source
    with _viewing(dev, location) as view:
        view.set_view(320, 256, 1.0)
        view.settle(20)
        cache, commands = view.cache, dev.commands
        assert cache.nbytes == cache.slots * slot_bytes(np.uint16, view.source.tile, "bc4")
        assert commands.driver_level_size(cache.tex, 0) == cache.nbytes
        assert cache.nbytes in [a.nbytes for a in dev.ledger.items()
                                if a.label == "science.tiles"]
        stored = commands.read_level(cache.tex, 0)
        rgba = np.frombuffer(commands.read_level(cache.tex, 0, rgba8=True), np.uint8)
        rgba = rgba.reshape(cache.slots_y * cache.pitch, cache.slots_x * cache.pitch, 4)
        key, slot = next((k, s) for k, s in view.slots._where.items() if k.level == 0)
        part = levels[key.level][key.channel]
        t = view.source.tile
        tile = encode_tile(part[key.ty * t:(key.ty + 1) * t, key.tx * t:(key.tx + 1) * t],
                           cache.pitch)
        x, y = cache.origin(slot)
        p = cache.pitch
        rows = [stored[((y // 4 + r) * cache.slots_x * p // 4 + x // 4) * 8:][:p // 4 * 8]
                for r in range(p // 4)]
        assert b"".join(rows) == tile.data
        ours = (decode_tile(tile, p) - tile.low) / tile.span * 255
        assert np.abs(rgba[y:y + p, x:x + p, 0] - ours).max() <= 1.0
        assert tuple(cache.ranges[slot]) == (np.float32(tile.low), np.float32(tile.span))


def test_a_quarter_of_the_exact_cache_under_the_same_view(dev, source):
    location, _ = source
    sizes = {}
    for encoding in ("exact", "bc4"):
        with dev.leak_check():
            view = ScienceView(str(location), dev, size=SIZE, budget=1 << 30,
                               encoding=encoding)
            try:
                view.set_view(320, 256, 1.0)
                view.settle(20)
                sizes[encoding] = (view.cache.slots, view.cache.nbytes)
            finally:
                view.release()
    assert sizes["bc4"][0] == sizes["exact"][0]
    assert sizes["bc4"][1] * 4 == sizes["exact"][1]


def test_a_growing_bc4_cache_keeps_its_tiles_and_their_ranges(dev, source):
    location, levels = source
    if not dev.caps.copy_image:
        pytest.skip("the driver copies no images (GL 4.3 / ARB_copy_image)")
    with _viewing(dev, location, budget=1 << 30) as view:
        decoded = _decoded(levels, view.source.tile)
        view.set_view(320, 256, 1.0)
        view.settle(20)
        before, reads, old = set(view.slots._where), view.reader.reads, view.cache
        view.resize((400, 300))
        stats = view.settle(20)
        assert view.cache is not old and stats.missing == 0
        now = set(view.slots._where)
        assert before <= now and view.reader.reads - reads == len(now - before)
        _check_picture(view, decoded, stats)


def test_an_unknown_encoding_is_refused(dev, source):
    with pytest.raises(UsageError, match="encoding 'bc7'"):
        ScienceView(str(source[0]), dev, size=SIZE, encoding="bc7")


def test_engine_view_keeps_bc4_tiles_when_asked(source, tmp_path, capsys):
    import json

    from engine.cli import main
    location, _ = source
    summaries = {}
    for encoding in ("exact", "bc4"):
        shot = tmp_path / f"{encoding}.png"
        assert main(["view", str(location), "--size", "160x120", "--encoding", encoding,
                     "--screenshot", str(shot)]) == 0
        summaries[encoding] = json.loads(capsys.readouterr().out)
        assert summaries[encoding]["complete"] and shot.exists()
    assert summaries["bc4"]["cache_bytes"] * 4 == summaries["exact"]["cache_bytes"]
    assert main(["view", str(location), "--encoding", "bc1"]) == 2
    assert "invalid choice: 'bc1'" in capsys.readouterr().err


def test_a_host_scene_asks_for_bc4_tiles(dev, source):
    from engine.hosts.science import ScienceFrames, ScienceScene
    from engine.science.gpu import EncodedValueCache

    with dev.leak_check():
        frames = ScienceFrames(dev, ScienceScene(str(source[0]), encoding="bc4"), (64, 48),
                               budget=16 << 20)
        try:
            frames.render()
            assert isinstance(frames.view.cache, EncodedValueCache)
        finally:
            frames.release()


# ------------------------------------------------------------------ encoded on the GPU
@pytest.fixture
def cpu_encoding(dev):
    """A driver without compute shaders (macOS's GL 4.1): the readers encode."""
    saved = dev.profile
    dev.profile = replace(saved, compute=False)
    yield
    dev.profile = saved


@pytest.mark.needs("compute shaders")
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "int8", "int16", "int32",
                                   "float16", "float32"])
def test_the_gpu_encoder_writes_the_cpu_encoders_bytes(dev, dtype):
    from engine import formats
    from engine.gl.vt import PageCache
    from engine.science.gpu_encode import RING, GpuTileEncoder

    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:64, 0:64]
    smooth = np.sin(xx / 9) * np.cos(yy / 7) * 100 + rng.normal(0, 3, (64, 64))
    floats = np.dtype(dtype).kind == "f"
    lo, hi = (-1e4, 1e4) if floats else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    tiles = [np.clip(smooth * (hi - lo) / 400 + (lo + hi) / 2, lo, hi).astype(dtype),
             rng.uniform(lo, hi, (64, 64)).astype(dtype),
             np.clip(smooth[:37, :50] + (lo + hi) / 2, lo, hi).astype(dtype),  # an edge tile
             np.full((64, 64), lo + 3, dtype)]
    if floats:
        tiles[1][5, 7], tiles[1][9, 1] = np.nan, -np.inf
    with dev.leak_check():
        encoder = GpuTileEncoder(dev, np.dtype(dtype), 64)
        pages = PageCache(dev, formats.get("BC4"), 3, 2, 64, label="test.bc4")
        try:
            ranges = [encoder.encode_into(pages, slot, t) for slot, t in enumerate(tiles)]
            stored = np.frombuffer(dev.commands.read_level(pages.tex, 0), "<u8").reshape(
                2 * 16, 3 * 16)
            for slot, (t, got_range) in enumerate(zip(tiles, ranges, strict=True)):
                want = encode_tile(t, 64)
                x, y = pages.slot_origin(slot)
                got = stored[y // 4:y // 4 + 16, x // 4:x // 4 + 16].tobytes()
                assert got == want.data, (dtype, slot)
                assert got_range == (want.low, want.span)
            assert len(tiles) == RING  # every staging place used once
        finally:
            pages.release()
            encoder.release()


@pytest.mark.parametrize("on_gpu", [True, False])
def test_bc4_views_encode_on_the_gpu_where_compute_runs(dev, source, on_gpu, request):
    if on_gpu and not dev.profile.compute:
        pytest.skip("no compute shaders (GL 4.3)")
    if not on_gpu:
        request.getfixturevalue("cpu_encoding")
    location, levels = source
    with _viewing(dev, location) as view:
        assert (view._encoder is not None, view.reader._prepare is None) == (on_gpu, on_gpu)
        decoded = _decoded(levels, view.source.tile)
        for stats in settled_stops(view, levels):
            _check_picture(view, decoded, stats)
