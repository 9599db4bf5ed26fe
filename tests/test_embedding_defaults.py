"""Issue 24's embedding, sizes and messages examples, one regression test each: the API streams
by default and is loud over budget, its inputs are checked like the CLI's (the same words),
one byte-size rule, sizes checked against the device, messages for installed users."""
from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

import pytest

import engine
from engine import cli, cli_args
from engine.app.loop import FrameLoop, OverBudget
from engine.hosts.run import run_scene
from engine.app.settings import RunSettings
from engine.demos.gltf_demo import build
from engine.errors import BudgetError, UsageError, install_hint
from engine.memory.sizes import parse_bytes
from engine.streaming.static import StaticTextureProvider

ROOT = Path(__file__).resolve().parents[1]
SIZE = (96, 64)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _main(argv: list[str], capsys) -> tuple[int, str]:
    rc = cli.main(argv)
    return rc, capsys.readouterr().err.strip()


# ------------------------------------------------------------------ streaming by default
def test_the_api_streams_by_default(device):
    assert RunSettings().provider == "streaming"
    loop = FrameLoop.embedded(device, build, size=SIZE)
    try:
        assert not isinstance(loop.provider, StaticTextureProvider)
    finally:
        loop.release()


def test_a_run_over_its_budget_says_so_and_why(device, caplog):
    """The issue's run ended `over_budget: true` with one stderr line as the only sign."""
    told: list[OverBudget] = []

    def squeeze(ctx):  # another program takes the memory: the budget falls below the floor
        ctx.governor.set_budget("1KiB")

    with caplog.at_level(logging.WARNING, "engine.app"):
        result = run_scene(build, frames=3, size=SIZE, budget="256MiB", device=device,
                           on_frame=[squeeze], on_over_budget=told.append)
    s = result.summary
    assert s["over_budget"] and s["over_budget_frames"] == 2 and s["provider"] == "streaming"
    assert "exceed" in s["over_budget_reason"]  # the governor's own why
    assert len(told) == 1 and told[0].frame == 1 and told[0].budget_bytes == 1024
    assert any("went over its budget" in r.message for r in caplog.records)


def test_a_budget_below_the_scenes_start_is_refused_before_frame_0(device):
    frames: list[int] = []
    with pytest.raises(BudgetError, match=r"cannot be met: this scene needs .* bytes\) to start"):
        run_scene(build, frames=3, size=SIZE, budget="1KiB", device=device,
                  on_frame=[lambda ctx: frames.append(ctx.frame)])
    assert frames == []


def test_the_hud_shows_over_budget(device):
    from engine.diagnostics.hud import BUDGET_COLOR, Hud, _rgba

    stats = {"frame": 1, "ms": 5.0, "total_bytes": 300, "budget_bytes": 400,
             "by_category": {"target": 300}, "render_scale": 1.0}
    hud = Hud(device)
    try:
        red = _rgba(BUDGET_COLOR)
        calm = sum(q[8:] == red for q in hud.layout((320, 240), stats).quads)
        loud = sum(q[8:] == red for q in hud.layout(
            (320, 240), {**stats, "over_budget_reason": "fixed 12 MiB exceed 2 MiB"}).quads)
        assert loud > calm + len("OVER")
    finally:
        hud.release()


# ------------------------------------------------------------------ one byte-size rule
@pytest.mark.parametrize("text, value", [
    ("1GB", 10 ** 9), ("512MB", 512 * 10 ** 6), ("500kB", 500_000), ("512MiB", 512 << 20),
    ("1.5GiB", 3 << 29), ("1TiB", 1 << 40), ("4096B", 4096), ("512mib", 512 << 20)])
def test_iec_is_binary_and_si_is_decimal(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text, says", [
    ("512m", "ambiguous: write 512MiB"), ("512M", "ambiguous"), ("2g", "or 2GB (decimal"),
    ("512", "needs a unit"), ("12 parsecs", "unknown unit")])
def test_bare_letters_and_bare_numbers_are_refused_with_a_hint(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_bytes(text)


def test_demo_budget_without_a_unit_exits_2_before_any_work(capsys):
    rc, err = _main(["demo", "gltf", "--budget", "512"], capsys)
    assert rc == 2 and err.count("\n") == 0 and "needs a unit" in err and "--budget" in err


def test_a_budget_above_the_device_is_one_warning_line(device, caplog):
    with caplog.at_level(logging.WARNING, "engine.app.loop"):
        run_scene(build, frames=1, size=SIZE, budget="1TiB", device=device)
    lines = [r.message for r in caplog.records if "more than the device's" in r.message]
    assert len(lines) == 1 and "will limit this run" in lines[0]


# ------------------------------------------------------------------ sizes
def test_a_size_whose_targets_do_not_fit_the_device_is_refused_before_anything(device):
    before = device.ledger.total
    with pytest.raises(UsageError, match=r"16384x16384: its render targets and output need"):
        run_scene(build, frames=1, size=(16384, 16384), device=device)
    assert device.ledger.total == before


def test_negative_size_gets_a_clear_message(capsys):
    rc, err = _main(["demo", "gltf", "--size", "-5x10"], capsys)
    assert rc == 2 and "-5x10 is out of range" in err and "expected one argument" not in err


# ------------------------------------------------------------------ API inputs like the CLI's
def test_api_sizes_like_the_cli():
    assert RunSettings(size="1920X1080").size == (1920, 1080)
    assert RunSettings(size=(1920, 1080)).size == (1920, 1080)
    for bad in [(1920, 1080.5), "big", (0, 10), (1, 2, 3), "1920x"]:
        with pytest.raises(UsageError, match="is not a size|out of range"):
            RunSettings(size=bad)


@pytest.mark.parametrize("field, value, cli_type", [
    ("frames", 0, cli_args.positive_int),
    ("frames", 2.5, cli_args.positive_int),
    ("budget", "512", cli_args.budget_arg),
    ("budget", "0MiB", cli_args.budget_arg),
    ("budget", "150%", cli_args.budget_arg),
])
def test_api_refuses_what_the_cli_refuses_with_the_same_words(field, value, cli_type):
    with pytest.raises(UsageError) as api:
        RunSettings(**{field: value})
    with pytest.raises(argparse.ArgumentTypeError) as line:
        cli_type(str(value))
    assert str(api.value) == f"{field}: {line.value}"


def test_a_window_run_may_run_until_closed():
    assert RunSettings(headless=False, frames=0).frames == 0


def test_engine_namespace_is_only_the_api():
    names = set(dir(engine))
    assert not names & {"Any", "annotations", "importlib", "_importlib"}
    assert names == {"__version__", *engine._API}


# ------------------------------------------------------------------ messages
def test_extras_are_named_for_installed_users():
    assert install_hint("nvml") == "pip install 'vram-budget-renderer[nvml]'"
    offenders = [str(p.relative_to(ROOT)) for folder in ("engine", "demos", "examples")
                 for p in (ROOT / folder).rglob("*.py") if "pip install -e" in p.read_text()]
    assert offenders == []


def test_nvml_missing_names_the_extra(monkeypatch):
    import sys

    from engine.memory.nvml import _import_pynvml

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    assert install_hint("nvml") in _import_pynvml().summary()


def test_uastc_bake_without_the_encoder_is_refused_before_work(monkeypatch, tmp_path, capsys):
    from engine.textures import basis
    from engine.cli import main as cli_main

    monkeypatch.setattr(basis, "encoder_available", lambda: False)
    out = tmp_path / "out"
    rc = cli_main(["bake", str(ROOT / "assets/photos/coffee.jpg"), "-o", str(out), "--format", "uastc"])
    err = capsys.readouterr().err
    assert rc == 2 and install_hint("basis") in err and err.startswith("error: ")
    assert not any(out.glob("*.ktx2"))


def test_demo_help_lists_the_demos(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["demo", "--help"])
    text = capsys.readouterr().out
    from engine.demos import DEMOS

    assert all(name in text for name in DEMOS) and "see demos/__init__.py" not in text


def test_report_of_a_picture_is_the_usual_one_line_error(tmp_path, capsys):
    picture = tmp_path / "some.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n")
    rc, err = _main(["report", str(picture)], capsys)
    assert rc == 1 and err.startswith("error: ") and "\n" not in err


def test_options_a_demo_does_not_read_are_refused(capsys):
    rc, err = _main(["demo", "gltf", "--count", "5"], capsys)
    assert rc == 2 and "--count does not apply to demo 'gltf'" in err and "gallery" in err


# ------------------------------------------------------------------ the main job
def test_the_gallery_runs_under_a_budget_that_binds_and_says_where_it_cached(
        tmp_path, monkeypatch, capsys, caplog):
    """The issue: the default budget (80% of the device) never bound the gallery, and its
    first run wrote its textures to the cache without saying how much or where."""
    import json

    monkeypatch.setenv("ENGINE_CACHE", str(tmp_path / "cache"))
    caplog.set_level(logging.INFO, "engine.progress")
    rc = cli.main(["demo", "gallery", "--headless", "--frames", "6", "--count", "4",
                   "--texture-size", "128", "--size", "160x96"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    s = json.loads(captured.out)
    assert s["budget_source"].startswith("measured from the scene")
    b = s["budget"]
    assert b["bound_frames"] == b["of_frames"] == 5 and not s["over_budget"]
    assert b["end"]["texture_resident_bytes"] < b["end"]["texture_wanted_bytes"]
    assert s["cache"]["dir"].startswith(str(tmp_path / "cache")) and s["cache"]["files"] == 4
    assert s["cache"]["bytes"] == s["cache"]["written_bytes"] > 0  # the first run made them
    said = caplog.text  # the two lines the command ends with, on stderr
    assert "it bound in 5 of 5 frames" in said
    assert f"texture cache: {s['cache']['dir']} holds" in said


@pytest.mark.parametrize("options, says", [
    ({"count": 0}, "count: 0 is out of range; accepted: 1 or more"),
    ({"count": 2.5}, "count: '2.5' is not a whole number"),
    ({"texture_size": 100}, "texture_size: 100 is out of range; accepted: a power of two")])
def test_api_scene_counts_like_the_cli(device, options, says):
    from engine.demos.gallery import build as gallery

    with pytest.raises(UsageError, match=re.escape(says)):
        run_scene(gallery, frames=1, size=SIZE, device=device, options=options)
