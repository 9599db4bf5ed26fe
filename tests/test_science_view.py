"""Scientific images on llvmpipe: OME-Zarr v2 and v3, OME-TIFF and an SVS-like tiled TIFF,
written by their own writers, viewed at several zooms: `pick` equals the source arrays
exactly, pictures equal a numpy reference of the same limits and LUTs, a contrast change
shows in the next frame with nothing read again, a hidden channel costs nothing, one source
comes over HTTP from a local server, and the budget and leak checks hold."""
from __future__ import annotations

import contextlib
import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("zarr")
pytest.importorskip("tifffile")

from science_helpers import (  # noqa: E402
    bilinear_reference,
    picture_difference,
    psnr,
    pyramid,
    reference,
    sample,
    settled_stops,
    write_ome_tiff,
    write_ome_zarr,
    write_slide,
)

from engine.errors import UsageError  # noqa: E402
from lab.http_files import served  # noqa: E402
from engine.science.display import ChannelDisplay  # noqa: E402
from engine.science.view import ScienceView  # noqa: E402

SIZE = (200, 150)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """name -> (location, (c, y, x) levels as the view must show them)."""
    root = tmp_path_factory.mktemp("science")
    rng = np.random.default_rng(7)
    u16 = pyramid(sample(rng, "uint16", (2, 512, 640)), 3)
    f32 = sample(rng, "float32", (2, 600, 520))
    rgb = sample(rng, "uint8", (3, 520, 600))
    slide = [np.moveaxis(rgb, 0, -1), np.moveaxis(rgb[:, ::2, ::2], 0, -1)]
    return {
        "zarr2-uint16": (write_ome_zarr(root / "a.zarr", u16, 2), u16),
        # one stored level: the coarser ones are made from it tile by tile
        "zarr3-float32": (write_ome_zarr(root / "b.zarr", [f32], 3, chunk=256),
                          pyramid(f32, 3)),
        "ome-tiff-uint16": (write_ome_tiff(root / "c.ome.tif", u16), u16),
        "slide-uint8": (write_slide(root / "d.svs", slide),
                        [np.moveaxis(s, -1, 0) for s in slide] + pyramid(
                            np.moveaxis(slide[1], -1, 0), 2)[1:]),
    }


def _check_picture(view, levels, stats):
    """Equal to the numpy picture, up to what float rounding decides: a pixel centre on a
    texel edge (picture_difference), and a value one LUT entry off at an entry's edge."""
    diff = picture_difference(view, levels, stats.level)
    assert np.mean(diff > 4) < 0.001, (stats, np.mean(diff > 4))
    assert psnr(diff, np.zeros_like(diff)) > 45  # the distance to the nearest reference


@contextlib.contextmanager
def _viewing(dev, location, **kw):
    """A view of `location` for the block, released and leak-checked after it."""
    with dev.leak_check():
        view = ScienceView(str(location), dev, size=SIZE, **{"budget": 32 << 20, **kw})
        try:
            yield view
        finally:
            view.release()


def _check_picks(view, levels, points):
    for x, y in points:
        got = view.pick(x, y)
        if got is None:
            continue
        want = levels[0][:, got.y, got.x]
        assert all(g.dtype == levels[0].dtype for g in got.values)
        assert np.array_equal(np.array(got.values), want)


@pytest.mark.parametrize("name", ["zarr2-uint16", "zarr3-float32", "ome-tiff-uint16",
                                  "slide-uint8"])
def test_views_at_several_zooms_equal_the_source(dev, sources, name):
    location, levels = sources[name]
    budget = 32 << 20
    with _viewing(dev, location, budget=budget) as view:
        seen = set()
        for stats in settled_stops(view, levels):  # the fitted one a made or stored level
            assert dev.ledger.total <= budget
            seen.add(stats.level)
            _check_picture(view, levels, stats)
            _check_picks(view, levels, [(0, 0), (37, 91), (SIZE[0] - 1, SIZE[1] - 1),
                                        (150, 20)])
        assert 0 in seen and len(seen) >= 2


def test_contrast_colormap_and_visibility_change_in_the_next_frame(dev, sources):
    location, levels = sources["zarr2-uint16"]
    with _viewing(dev, location) as view:
        stats = view.settle(20)
        reads, uploads = view.reader.reads, view.cache.uploads
        before = view.picture()
        # nothing changed: the target keeps its picture and nothing is drawn
        assert not view.frame().drawn and np.array_equal(before, view.picture())
        view.set_display(0, low=20000.0, high=40000.0, gamma=0.7, colormap="magma")
        stats = view.frame()
        assert stats.drawn
        _check_picture(view, levels, stats)
        assert not np.array_equal(before, view.picture())
        view.set_display(1, visible=False)
        stats = view.frame()
        _check_picture(view, levels, stats)
        assert (view.reader.reads, view.cache.uploads) == (reads, uploads)


def test_linear_sampling_of_float_data_with_exact_picks(dev, sources):
    """Magnified 4x across a tile edge: the bilinear numpy picture (clamped to each tile,
    as the shader is), unlike the nearest one; picks stay the source's values."""
    location, levels = sources["zarr3-float32"]
    with _viewing(dev, location, sampling="linear") as view:
        view.set_view(250, 260, 0.25)
        stats = view.settle(20)
        assert stats.level == 0 and stats.missing == 0
        got = view.picture().astype(np.int32)
        want = bilinear_reference(levels[0], view.viewport, view.displays, view.source.tile)
        assert np.mean(np.abs(got - want).max(axis=2) > 4) < 0.002
        nearest = reference(levels, 0, view.viewport, view.displays).astype(np.int32)
        assert np.mean(np.abs(got - nearest).max(axis=2) > 4) > 0.1
        _check_picks(view, levels, [(0, 0), (37, 91), (150, 20)])
    with pytest.raises(UsageError, match="float data"):
        ScienceView(str(sources["zarr2-uint16"][0]), dev, size=SIZE, sampling="linear")


def test_a_hidden_channel_reads_nothing(dev, sources):
    location, levels = sources["ome-tiff-uint16"]
    displays = [ChannelDisplay(0, 65535, colormap="viridis"),
                ChannelDisplay(0, 65535, visible=False)]
    with _viewing(dev, location, displays=displays) as view:
        view.set_view(300, 200, 1.0)
        stats = view.settle(20)
        assert stats.exact == stats.wanted - 1  # the coarsest tile is wanted, not drawn
        assert all(k.channel == 0 for k in view.slots._where)
        _check_picture(view, levels, stats)


@pytest.mark.parametrize("encoding", ["exact", "bc4"])
def test_a_small_budget_shows_a_coarser_level_and_stays_within(dev, sources, encoding):
    from engine.science.gpu import slot_bytes

    location, levels = sources["zarr2-uint16"]
    with _viewing(dev, location, budget=1 << 30, encoding=encoding) as probe:
        probe.set_view(320, 256, 1.0)  # the quad buffer is sized for the zoom
        probe.frame()
        fixed = dev.ledger.total - probe.cache.nbytes
    # the fixed objects (a BC4 view's encoder staging among them) and room for 4 tiles of
    # 128^2: too few for level 0
    budget = fixed + 4 * slot_bytes(np.uint16, 128, encoding)
    with _viewing(dev, location, budget=budget, encoding=encoding) as view:
        view.set_view(320, 256, 1.0)
        stats = view.settle(20)
        assert dev.ledger.total <= budget
        assert stats.level > 0 and stats.missing == 0
        if encoding == "exact":  # BC4 pictures: tests/test_science_bc4.py
            _check_picture(view, levels, stats)


def test_a_moving_view_spreads_uploads_over_frames_most_wanted_first(dev, sources, monkeypatch):
    import engine.science.view as view_module
    monkeypatch.setattr(view_module, "UPLOAD_S", 0.0)  # one tile a frame
    location, levels = sources["zarr2-uint16"]
    with _viewing(dev, location) as view:
        view.set_view(320, 256, 1.0)
        stats = view.frame()
        view.reader.wait_idle(20)
        before = view.cache.uploads
        view.pan(1, 0)  # a moving view: its frames upload within the limit
        stats = view.frame()
        assert view.cache.uploads == before + 1
        assert stats.pending == stats.missing + 1  # read, waiting for their upload
        coarsest = len(view.source.levels_of(0)) - 1
        assert list(view.slots._where) == [(coarsest, 0, 0, 0)]  # the most wanted first
        view.reader.wait_idle(20)
        stats = view.frame()  # at rest: all that arrived at once
        assert stats.missing == 0 and stats.pending == 0
        _check_picture(view, levels, stats)


@pytest.fixture(scope="module")
def server(sources):
    with served(sources["zarr2-uint16"][0].parent) as base:
        yield base


@pytest.mark.parametrize("name", ["zarr2-uint16", "ome-tiff-uint16"])
def test_a_source_over_http(dev, sources, server, name):
    pytest.importorskip("aiohttp")
    location, levels = sources[name]
    with _viewing(dev, f"{server}/{location.name}") as view:
        view.set_view(200, 300, 0.5)
        stats = view.settle(20)
        assert stats.missing == 0
        _check_picture(view, levels, stats)
        _check_picks(view, levels, [(3, 4), (120, 77)])


def test_engine_view_shows_an_ome_zarr_with_channel_options(sources, tmp_path, capsys):
    from PIL import Image

    from engine.cli import main
    location, levels = sources["zarr2-uint16"]
    shot = tmp_path / "shot.png"
    assert main(["view", str(location), "--size", "160x120", "--contrast", "0=0:65535",
                 "--colormap", "1=#00ffff", "--channels", "1", "--screenshot", str(shot)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["complete"] and summary["channels"] == 2
    assert summary["peak_bytes"] <= summary["budget_bytes"]
    picture = np.asarray(Image.open(shot))
    assert picture.shape == (120, 160, 3) and picture[..., 0].max() == 0  # cyan only
    assert picture[..., 1].max() > 0
    assert main(["view", str(location), "--channels", "5"]) == 2
    assert "channel 5 out of range" in capsys.readouterr().err


def test_the_cache_is_made_once_for_a_still_view(dev, sources):
    """Sized for the most tiles the zoom can meet (a grid of at least that many slots), it is
    not remade while the view waits for its tiles (a grid a slot short of the need would be
    remade at double the size on the second frame)."""
    import math

    import engine.science.view as view_module

    location, _ = sources["zarr2-uint16"]
    with _viewing(dev, location, budget=1 << 30) as view:
        view.frame()
        first = view.cache
        stats = view.settle(20)
        assert view.cache is first and stats.missing == 0
        need = math.ceil(view._most_wanted(view._visible()) * view_module.SLACK)
        assert need <= first.slots < need + first.slots_x, (need, first.slots)


@pytest.mark.parametrize("copies", [True, False])
def test_a_cache_that_grows_keeps_its_tiles_where_the_gpu_copies(dev, sources, copies,
                                                                 monkeypatch):
    """A larger view needs more slots: where the GPU copies images (GL 4.3) the tiles move
    to the new cache and only the new ones are read; elsewhere every tile is read again.
    Either way the picture and the picks equal the source's."""
    location, levels = sources["zarr2-uint16"]
    monkeypatch.setattr(dev, "caps", replace(dev.caps, copy_image=dev.caps.copy_image and copies))
    with _viewing(dev, location, budget=1 << 30) as view:
        view.set_view(320, 256, 1.0)
        view.settle(20)
        before, reads, old = set(view.slots._where), view.reader.reads, view.cache
        view.resize((400, 300))
        stats = view.settle(20)
        assert view.cache is not old and view.cache.slots > old.slots and stats.missing == 0
        now = set(view.slots._where)
        assert before <= now
        assert view.reader.reads - reads == len(now - before if copies else now)
        _check_picture(view, levels, stats)
        _check_picks(view, levels, [(5, 5), (200, 150), (390, 290)])
