"""Run report schema, the timeline picture and `python -m engine report`."""
from __future__ import annotations

import json

import pytest
from PIL import Image

from engine.cli import main
from engine.diagnostics.report import (
    ReportError,
    build_report,
    load_report,
    validate_report,
)
from engine.diagnostics.timeline import render_timeline


def _frames(n: int = 40) -> list[dict]:
    out = []
    for i in range(n):
        budget = 64 << 20 if i < n // 2 else 32 << 20
        cats = {"texture.streamed": (40 << 20) if i < n // 2 else (20 << 20),
                "target": 5 << 20, "buffer": 1 << 20}
        out.append({"frame": i, "ms": 5.0 + i % 7, "total_bytes": sum(cats.values()),
                    "budget_bytes": budget, "by_category": cats,
                    "render_scale": 1.0 if i < n // 2 else 0.7,
                    "texture_resident_bytes": cats["texture.streamed"],
                    "texture_wanted_bytes": 40 << 20})
    return out


def test_build_report_summary():
    r = build_report(_frames(), leaked_objects=0, extra={"renderer": "test"})
    s = r["summary"]
    assert s["frames"] == 40 and s["budget_bytes"] == 32 << 20
    assert s["budget_bytes_min"] == 32 << 20 and s["peak_bytes"] == 46 << 20
    assert s["peak_by_category"]["texture.streamed"] == 40 << 20
    assert s["frame_ms_p50"] <= s["frame_ms_p99"] and s["renderer"] == "test"
    assert s["over_budget_frames"] == 0


@pytest.mark.parametrize("path, key", [(("summary",), "leaked_objects"),
                                       (("frames", 3), "render_scale")])
def test_validate_names_the_missing_key(path, key):
    r = build_report(_frames(), leaked_objects=0)
    node = r
    for p in path:
        node = node[p]
    del node[key]
    with pytest.raises(ReportError, match=key):
        validate_report(r)


def test_load_report_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ReportError, match="bad.json"):
        load_report(bad)
    bad.write_text(json.dumps({"summary": {}, "frames": []}))
    with pytest.raises(ReportError, match="frames"):
        load_report(bad)


def test_timeline_png_and_cli(tmp_path):
    r = build_report(_frames(), leaked_objects=1)
    out = render_timeline(r, tmp_path / "t.png", size=(800, 500))
    with Image.open(out) as im:
        assert im.size == (800, 500)
        colors = {c for _, c in im.convert("RGB").getcolors(1 << 20)}
    assert (76, 145, 224) in colors  # texture.streamed area drawn in its colour
    run = tmp_path / "run.json"
    run.write_text(json.dumps(r))
    assert main(["report", str(run), "-o", str(tmp_path / "cli.png")]) == 0
    assert (tmp_path / "cli.png").is_file()
    (tmp_path / "broken.json").write_text("[]")
    assert main(["report", str(tmp_path / "broken.json")]) == 1


def test_single_frame_report_draws(tmp_path):
    """One frame: its memory as a thin column per category, the budget and the render scale
    as lines across the panel, its frame time as a dot."""
    import numpy as np

    from engine.diagnostics.timeline import BUDGET_COLOR, SCALE_COLOR, is_timeline_png

    out = render_timeline(build_report(_frames(1), leaked_objects=0), tmp_path / "one.png")
    assert is_timeline_png(out)
    with Image.open(out) as im:
        assert im.size == (1200, 720)
        rgb = np.asarray(im.convert("RGB"))

    def where(colour) -> tuple[np.ndarray, np.ndarray]:
        return np.nonzero(np.all(rgb == np.array(colour, np.uint8), axis=-1))

    _, xs = where((76, 145, 224))  # texture.streamed (and its legend swatch)
    per_x = np.bincount(xs, minlength=rgb.shape[1])
    tall = np.flatnonzero(per_x > 40)
    assert tall.size and tall.max() - tall.min() <= 5  # a column, not an area
    for colour in (BUDGET_COLOR, SCALE_COLOR):  # lines across the plot
        _, xs = where(colour)
        assert xs.size and xs.max() - xs.min() > 600, colour
    ys, xs = where((50, 110, 200))  # the one frame time: a dot
    assert xs.size and xs.max() - xs.min() <= 7 and ys.max() - ys.min() <= 7
