"""Reports and timelines that tell the truth (issue 15): a metadata block saying what made
the report; a timeline that never overwrites a file the run did not make, draws every series
inside its axes, survives NaN frame times and refuses absurd sizes before allocating."""
from __future__ import annotations

import datetime
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.cli import main
from engine.diagnostics.report import (
    ReportError,
    build_report,
    collect_metadata,
    engine_version,
    load_report,
    validate_report,
    write_report,
)
from engine.diagnostics.timeline import (
    BUDGET_COLOR,
    SCALE_COLOR,
    _Pillow,
    default_output,
    is_timeline_png,
    parse_size,
    render_timeline,
)
from engine.errors import OutputExistsError, UsageError

ROOT = Path(__file__).resolve().parents[1]
MiB, GiB = 1 << 20, 1 << 30


def _frames(n: int = 30, budget: int = 64 * MiB, scale: float = 1.0,
            streamed: int = 40 * MiB) -> list[dict]:
    return [{"frame": i, "ms": 5.0 + i % 4, "total_bytes": streamed + 5 * MiB,
             "budget_bytes": budget, "by_category": {"texture.streamed": streamed,
                                                     "target": 5 * MiB},
             "render_scale": scale, "texture_resident_bytes": streamed,
             "texture_wanted_bytes": streamed} for i in range(n)]


# ------------------------------------------------------------------- metadata
def test_metadata_block_says_what_made_the_report(tmp_path):
    when = datetime.datetime(2026, 11, 30, 15, 4, 5, tzinfo=datetime.timezone.utc)
    meta = collect_metadata(command=["python", "-m", "engine", "demo", "gallery"],
                            scene="gallery", options={"frames": 30, "shot": tmp_path / "g.png"},
                            renderer="llvmpipe (LLVM 15.0.6, 256 bits)", gl_version="4.5",
                            now=when)
    report = build_report(_frames(), leaked_objects=0, metadata=meta)
    m = report["metadata"]
    assert m["command"] == ["python", "-m", "engine", "demo", "gallery"]
    assert m["scene"] == "gallery" and m["options"] == {"frames": 30,
                                                        "shot": str(tmp_path / "g.png")}
    assert m["renderer"].startswith("llvmpipe") and m["gl_version"] == "4.5"
    assert m["created_utc"] == "2026-11-30T15:04:05Z"
    assert m["host"] and m["python"].count(".") == 2
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert m["engine_version"] == engine_version() == version
    path = write_report(report, tmp_path / "run.json")
    assert load_report(path)["metadata"] == m


def test_metadata_defaults_to_this_process():
    import sys

    meta = collect_metadata()
    assert meta["command"] == [str(a) for a in sys.argv]
    assert "renderer" not in meta  # only the caller (the device) knows it
    assert meta["created_utc"].endswith("Z")


def test_reports_without_metadata_still_load(tmp_path):
    old = build_report(_frames(), leaked_objects=0)
    assert "metadata" not in old
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert load_report(tmp_path / "old.json")["summary"]["frames"] == 30


def test_bad_metadata_is_named():
    report = build_report(_frames(), leaked_objects=0, metadata=collect_metadata())
    report["metadata"]["scene"] = 5
    with pytest.raises(ReportError, match="metadata.scene"):
        validate_report(report)
    report["metadata"] = []
    with pytest.raises(ReportError, match="metadata"):
        validate_report(report)


# ------------------------------------------------------------------- no overwrite
@pytest.fixture
def run_and_screenshot(tmp_path) -> tuple[Path, Path, bytes]:
    run = write_report(build_report(_frames(), leaked_objects=0), tmp_path / "run.json")
    shot = tmp_path / "run.png"  # where the README's naming puts the run's screenshot
    Image.new("RGB", (64, 48), (10, 200, 30)).save(shot)
    return run, shot, shot.read_bytes()


def test_report_without_o_keeps_the_screenshot(run_and_screenshot, capsys):
    run, shot, before = run_and_screenshot
    assert default_output(run) == run.with_name("run.timeline.png")
    assert main(["report", str(run)]) == 0
    assert shot.read_bytes() == before
    out = run.with_name("run.timeline.png")
    assert is_timeline_png(out) and not is_timeline_png(shot)
    assert str(out) in capsys.readouterr().out  # says where the picture went
    assert main(["report", str(run)]) == 0  # its own earlier picture may be replaced


def test_report_refuses_to_overwrite_a_foreign_file(run_and_screenshot, capsys):
    run, shot, before = run_and_screenshot
    assert main(["report", str(run), "-o", str(shot)]) == 2
    err = capsys.readouterr().err
    assert "--force" in err and len(err.strip().splitlines()) == 1
    assert shot.read_bytes() == before
    with pytest.raises(OutputExistsError):
        render_timeline(load_report(run), shot)
    assert main(["report", str(run), "-o", str(shot), "--force"]) == 0
    assert is_timeline_png(shot)


# ------------------------------------------------------------------- series inside axes
def _runs(mask: np.ndarray) -> int:
    """Longest horizontal run of True in any row."""
    best = 0
    for row in mask:
        idx = np.flatnonzero(np.diff(np.concatenate([[0], row.astype(np.int8), [0]])))
        if idx.size:
            best = max(best, int((idx[1::2] - idx[0::2]).max()))
    return best


@pytest.mark.parametrize("budget", [64 * MiB, 100 * GiB])  # near memory, and far above it
def test_budget_and_scale_lines_are_inside_the_memory_panel(budget):
    report = build_report(_frames(budget=budget, scale=1.0), leaked_objects=0)
    pic = _Pillow(report, (900, 600))
    top, bottom = pic.panels["memory"]
    for name in ("budget", "render scale"):
        lo, hi = pic.extents[name]
        assert top + 2 < lo <= hi < bottom - 1, (name, lo, hi, top, bottom)
    rgb = np.asarray(pic.im)
    inner = rgb[top + 2:bottom - 1, pic.left + 2:pic.right - 1]
    width = pic.right - pic.left - 3
    # Each line really is drawn, across the panel, strictly inside the box.
    assert _runs((inner == BUDGET_COLOR).all(-1)) > 0.9 * width
    assert _runs((inner == SCALE_COLOR).all(-1)) > 0.9 * width
    # and nothing of the budget colour sits on the border rows
    assert not (rgb[top, pic.left:pic.right] == BUDGET_COLOR).all(-1).any()


def test_far_budget_is_labelled_with_the_peak_share():
    report = build_report(_frames(budget=100 * GiB), leaked_objects=0)
    tall = _Pillow(report, (900, 600))
    near = _Pillow(build_report(_frames(budget=64 * MiB), leaked_objects=0), (900, 600))
    # The label is extra text in the memory panel: more dark text pixels than without it.
    def text_pixels(p):
        top, bottom = p.panels["memory"]
        return int((np.asarray(p.im)[bottom - 30:bottom, :] == (30, 30, 30)).all(-1).sum())
    assert text_pixels(tall) > text_pixels(near)


# ------------------------------------------------------------------- NaN frame times
def test_nan_and_inf_frame_times_are_skipped_and_counted(tmp_path):
    frames = _frames(20)
    frames[3]["ms"] = float("nan")
    frames[9]["ms"] = float("inf")
    report = build_report(frames, leaked_objects=0)
    s = report["summary"]
    assert s["nonfinite_frame_times"] == 2
    assert math.isfinite(s["frame_ms_p50"]) and math.isfinite(s["frame_ms_p99"])
    pic = _Pillow(report, (800, 500))
    assert pic.skipped_frame_times == 2
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(report))  # NaN / Infinity tokens, as Python writes them
    assert main(["report", str(path)]) == 0
    assert is_timeline_png(default_output(path))


def test_all_frame_times_nan_still_draws(tmp_path):
    frames = _frames(5)
    for f in frames:
        f["ms"] = float("nan")
    out = render_timeline(build_report(frames, leaked_objects=0), tmp_path / "t.png")
    assert is_timeline_png(out)


# ------------------------------------------------------------------- --size
def test_size_is_validated_before_allocating(run_and_screenshot, capsys):
    run, _, _ = run_and_screenshot
    assert main(["report", str(run), "--size", "99999x99999"]) == 2
    err = capsys.readouterr().err
    assert "--size" in err and "8192" in err
    assert not default_output(run).exists()
    with pytest.raises(UsageError, match="8192"):
        render_timeline(load_report(run), run.with_name("x.png"), size=(99999, 99999))
    for bad in ("abc", "10x", "0x0", "-5x100"):
        with pytest.raises(UsageError, match="--size"):
            parse_size(bad)
    assert parse_size("1920x1080") == (1920, 1080)
