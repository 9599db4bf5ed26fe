"""Several sources as layers of one ScienceView: one value cache and one budget by what the
screen shows, each layer drawn exactly as a view of it alone, picks from every layer, a
hidden layer holding no tile, and `engine view` of several paths."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("zarr")

from science_helpers import pyramid, reference, sample, write_ome_zarr  # noqa: E402

from engine.errors import UsageError  # noqa: E402
from engine.science.display import ChannelDisplay  # noqa: E402
from engine.science.view import ScienceView  # noqa: E402

SIZE = (120, 90)
BUDGET = 16 << 20
RED, GREEN = ChannelDisplay(0, 65535, colormap="red"), ChannelDisplay(0, 65535, colormap="green")


@pytest.fixture(scope="module")
def layers(tmp_path_factory):
    """Two one-channel uint16 images of different sizes and chunks, and a float32 one."""
    root = tmp_path_factory.mktemp("layers")
    rng = np.random.default_rng(11)
    a = pyramid(sample(rng, "uint16", (1, 300, 400)), 2)
    b = pyramid(sample(rng, "uint16", (1, 256, 256)), 2)
    f = sample(rng, "float32", (1, 64, 64))
    return {"a": (write_ome_zarr(root / "a.zarr", a, 3, chunk=128), a),
            "b": (write_ome_zarr(root / "b.zarr", b, 2, chunk=256), b),
            "f": (write_ome_zarr(root / "f.zarr", [f], 3), [f])}


def _alone(dev, path, display, view_at):
    view = ScienceView(str(path), dev, size=SIZE, budget=BUDGET, displays=[display])
    try:
        view.set_view(*view_at)
        view.settle(20)
        return view.picture()
    finally:
        view.release()


def test_layers_share_one_cache_and_draw_as_each_alone(dev, layers):
    (pa, a), (pb, b) = layers["a"], layers["b"]
    view_at = (200.0, 128.0, 1.0)
    with dev.leak_check():
        view = ScienceView([str(pa), str(pb)], dev, size=SIZE, budget=BUDGET,
                           displays=[RED, GREEN])
        try:
            view.set_view(*view_at)
            stats = view.settle(20)
            assert stats.missing == 0 and stats.level == 0
            assert dev.ledger.total <= BUDGET
            assert {k.channel for k in view.slots._where} == {0, 1}  # one cache, both
            both = view.picture()
            pick = view.pick(10, 10)  # level-0 (150, 93): inside both
            assert pick.values == (a[0][0, pick.y, pick.x], b[0][0, pick.y, pick.x])
            pick = view.pick(SIZE[0] - 1, 10)  # x 259: past b's 256 columns
            assert pick.values[0] == a[0][0, pick.y, pick.x] and pick.values[1] is None
            view.set_layer_visible(1, False)
            view.settle(20)
            only_a = view.picture()
            before = set(view.slots._where)
            view.set_view(100.0, 150.0, 1.0)  # somewhere new: only a's tiles are read
            view.settle(20)
            new = set(view.slots._where) - before
            assert new and all(k.channel == 0 for k in new)
        finally:
            view.release()
    red = _alone(dev, pa, RED, view_at)
    green = _alone(dev, pb, GREEN, view_at)
    assert np.array_equal(both[..., 0], red[..., 0])  # each layer exactly as alone
    assert np.array_equal(both[..., 1], green[..., 1])
    assert np.array_equal(only_a, red)


def test_layers_of_different_dtypes_are_refused(dev, layers):
    with pytest.raises(UsageError, match="share a dtype"):
        ScienceView([str(layers["a"][0]), str(layers["f"][0])], dev, size=SIZE,
                    budget=BUDGET)


def test_engine_view_of_several_paths_shows_them_as_layers(layers, tmp_path, capsys):
    from PIL import Image

    from engine.cli import main
    shot = tmp_path / "shot.png"
    assert main(["view", str(layers["a"][0]), str(layers["b"][0]), "--headless",
                 "--size", "64x48", "--colormap", "0=red,1=green",
                 "--screenshot", str(shot)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["layers"] == 2 and summary["channels"] == 2 and summary["complete"]
    picture = np.asarray(Image.open(shot))
    assert picture[..., 0].max() > 0 and picture[..., 1].max() > 0 and picture[..., 2].max() == 0


def test_twenty_layers_draw_at_once_and_a_pan_keeps_the_cache(dev, layers):
    pa, a = layers["a"]
    displays = [ChannelDisplay(0, 20 * 65535, colormap=("red", "green")[i % 2])
                for i in range(20)]
    with dev.leak_check():
        view = ScienceView([str(pa)] * 20, dev, size=SIZE, budget=BUDGET, displays=displays)
        try:
            view.set_view(200.0, 128.0, 1.0)
            stats = view.settle(20)
            assert stats.missing == 0 and stats.level == 0
            assert {k.channel for k in view.slots._where} == set(range(20))
            want = reference([np.concatenate([lv] * 20) for lv in a], 0, view.viewport,
                             view.displays)
            diff = np.abs(view.picture().astype(np.int32) - want.astype(np.int32)).max(axis=2)
            assert np.mean(diff > 4) < 0.01, np.mean(diff > 4)
            cache = view.cache  # sized for the zoom, not for where it started
            for _ in range(40):
                view.pan(-8, -3)
                view.frame()
                assert view.cache is cache and dev.ledger.total <= BUDGET
        finally:
            view.release()


def test_missing_tiles_of_layers_alike_are_covered_in_one_call(dev, layers):
    """A frame covers the missing tiles of every layer with the same pyramid at once (one
    numpy pass, not one a layer): layers 0 and 2 of one image and layer 1 of another make
    two calls, whose channels are those layers'."""
    (pa, _), (pb, _) = layers["a"], layers["b"]
    with dev.leak_check():
        view = ScienceView([str(pa), str(pb), str(pa)], dev, size=SIZE, budget=BUDGET,
                           displays=[RED, GREEN, RED], workers=1)
        calls = []
        real = view._covers.cover

        def counted(levels, tile, keys, slots):
            calls.append({k.channel for k in keys})
            return real(levels, tile, keys, slots)

        view._covers.cover = counted
        try:
            view.set_view(60.0, 40.0, 1.0)
            view.frame()  # the first frame: every tile missing
            assert sorted(map(sorted, calls)) == [[0, 2], [1]]
        finally:
            view.release()
