"""`python -m lab bench viewers`: the engine's side on llvmpipe, the peers only where
they are installed (the `peers` extra), and a peer that cannot run reported, not raised."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import replace

import numpy as np
import pytest

from lab import viewer_children, viewers

TINY = replace(viewers.QUICK, photos=3, photo_size=(320, 240), huge=(1200, 900), zooms=1,
               pan_frames=3, timeout_s=120.0, wait_s=20.0)


def test_huge_tiff_is_a_pyramid_of_the_same_picture(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    path = viewers.make_huge(tmp_path / "huge.tif", (1200, 2100))
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        assert page.is_tiled and page.shape == (2100, 1200, 3)
        levels = [page.asarray()] + [tif.pages[0].pages[i].asarray()
                                     for i in range(len(page.pages))]
    assert [lv.shape[:2] for lv in levels] == [(2100, 1200), (1050, 600)]
    full, half = levels
    assert (full[0, 0] == (255, 0, 0)).all() and (full[-1, -1] == (255, 255, 0)).all()
    np.testing.assert_array_equal(half, full[::2, ::2])


def test_photos_are_distinct_files_of_one_size(tmp_path):
    from PIL import Image

    paths = viewers.make_photos(tmp_path, 3, (320, 240), distinct=2)
    assert len({p.read_bytes() for p in paths}) == 3
    for p in paths:
        with Image.open(p) as im:
            assert im.size == (320, 240) and im.format == "JPEG"


def test_a_peer_that_cannot_import_is_reported(tmp_path, monkeypatch):
    monkeypatch.setitem(viewer_children.NEEDS, "napari", ("no_such_module_for_the_test",))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"part": "photos"}))
    out = tmp_path / "out.json"
    assert viewer_children.main(["napari", str(spec), str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["available"] is False and "no_such_module_for_the_test" in got["reason"]


def test_zoom_rows_split_by_encoded_and_count_misses():
    zooms = [{"encoded": True, "reached": True, "seconds": 0.1},
             {"encoded": True, "reached": True, "seconds": 0.2},
             {"encoded": False, "reached": False, "seconds": 30.0}]
    rows = viewers.zoom_rows([{"viewer": "engine", "part": "photos", "zooms": zooms}])
    enc, fresh = rows
    assert enc["viewer"].endswith("encoded already") and enc["zooms"] == 2 and enc["met"]
    assert fresh["not_reached"] == 1 and fresh["met"] is False


@pytest.mark.slow
def test_engine_side_runs_and_peers_where_installed(tmp_path):
    """The engine cold and warm on tiny photographs (the huge image goes the same way); each
    peer that imports here runs too, and says how it ended (a peer that cannot run, why)."""
    installed = tuple(v for v in viewers.VIEWERS[1:] if importlib.util.find_spec(v))
    res, raw = viewers.run_viewers(TINY, ("engine",) + installed, parts=("photos",),
                                   data=tmp_path / "data")
    by = {(r["viewer"], r["part"], r["run"]): r for r in raw}
    cold, warm = by[("engine", "photos", "cold")], by[("engine", "photos", "warm")]
    assert cold["status"] == "ok" and warm["status"] == "ok", (cold, warm)
    assert cold["first_frame_s"] > 0 and cold["gpu_bytes_peak"] > 0
    assert cold["over_budget_frames"] == 0 and cold["images"] == TINY.photos
    for z in cold["zooms"] + warm["zooms"]:  # on screen no sooner than resident
        assert z["reached"] and z["settled"] and z["shown_s"] >= z["seconds"], z
    assert all(z["encoded"] for z in warm["zooms"])  # the cold run encoded them
    assert len(cold["pan_ms"]) == TINY.pan_frames
    for peer in installed:
        assert by[(peer, "photos", "")]["status"], peer
    assert any(r["viewer"].startswith("engine zoom") for r in res.rows)
