"""The deep-zoom bench (lab.deepzoom) at its quick size: a generated tiled TIFF baked
once with its tiled sidecar, then viewed as one virtual texture under the budget, every cut
from disk reaching its detail, no frame over the budget, no leak."""
from __future__ import annotations

import pytest

from lab import deepzoom
from engine.textures.tiled import sidecar_path

pytest.importorskip("tifffile")


def test_cut_points_keep_the_view_inside_the_image():
    pts = deepzoom.cut_points(4096, 2048, (640, 360), 50, seed=1)
    assert len(pts) == 50 and len(set(pts)) == 50
    assert all(320 <= x <= 4096 - 320 and 180 <= y <= 2048 - 180 for x, y in pts)
    assert pts == deepzoom.cut_points(4096, 2048, (640, 360), 50, seed=1)  # reproducible


@pytest.mark.slow
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_quick_deep_zoom_reaches_every_cut_from_disk(tmp_path):
    profile = deepzoom.profile_for(quick=True)
    r = deepzoom.run_deepzoom(profile, tmp_path)
    assert r["baked"] == "now" and r["width"] == r["height"] == profile.edge
    baked = tmp_path / "baked_bc1" / f"huge_{profile.edge}.ktx2"
    assert baked.is_file() and sidecar_path(baked).is_file()
    assert r["virtual"] and r["cuts"] == profile.cuts == r["reached"]
    assert all(c["from_disk"] and c["at_wanted"] >= deepzoom.REACHED for c in r["cut_rows"])
    assert r["over_budget_frames"] == 0 and r["peak_bytes"] <= profile.budget
    assert r["leaked_objects"] == 0
    assert r["cut_p50_ms"] <= r["cut_p95_ms"] <= r["cut_max_ms"]
    assert len(r["notes"]) == 1 and "goal cut p95" in r["notes"][0]
    source = tmp_path / f"huge_{profile.edge}.tif"
    assert deepzoom.bake(source, baked.parent, "bc1") == (baked, {"baked": "kept"})


@pytest.mark.parametrize("args", [["--cuts", "0"], ["--budget", "50%"], ["--budget", "12xyz"],
                                  ["--wait", "nan"], ["--source", "/no/such.tif"]])
def test_bad_arguments_are_one_line_and_status_2(args, capsys):
    with pytest.raises(SystemExit) as exc:
        deepzoom.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "Traceback" not in "".join(err)
    assert err[-1].startswith("python -m lab.deepzoom: error: argument")  # after usage


def test_a_source_that_cannot_be_baked_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.tif"
    bad.write_bytes(b"not a tiff")
    with pytest.raises(SystemExit) as exc:
        deepzoom.main(["--source", str(bad), "--work", str(tmp_path / "work")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "bake of" in err[-1] and "Traceback" not in "".join(err)
    assert not list((tmp_path / "work").rglob("*.ktx2"))
