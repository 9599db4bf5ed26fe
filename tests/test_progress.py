"""Progress: a tqdm bar on a terminal; on anything else no bar, but a start and an end line
per stage through the `engine.progress` logger, visible in the CLI and without any logging
configuration at all."""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.textures.progress import Progress

ROOT = Path(__file__).resolve().parents[1]


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_gets_a_bar_and_no_log_lines(caplog):
    stream = FakeTty()
    with caplog.at_level(logging.INFO, logger="engine.progress"):
        with Progress(4, "bake", stream=stream) as bar:
            assert bar.enabled
            for name in ("a.png", "b.png", "c.png", "d.png"):
                bar.advance(1, name)
    text = stream.getvalue()
    assert "bake" in text and "4/4" in text and "100%" in text
    assert "d.png" in text  # the note of the last item is on the final bar
    assert bar.done == 4
    assert not [r for r in caplog.records if r.name == "engine.progress"]


def test_non_terminal_gets_stage_lines_with_counts_and_seconds(caplog):
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="engine.progress"):
        with Progress(3, "gallery 256px bc7", stream=stream) as bar:
            assert not bar.enabled
            bar.advance(2, "x")
            bar.advance(5)  # clamped to the total
    assert stream.getvalue() == ""  # quiet: nothing drawn
    lines = [r.getMessage() for r in caplog.records if r.name == "engine.progress"]
    assert len(lines) == 2
    assert lines[0] == "gallery 256px bc7: started, 3 item(s)"
    assert lines[1].startswith("gallery 256px bc7: 3/3 done in ") and " s" in lines[1]
    secs = float(lines[1].split(" done in ")[1].split(" s")[0])
    assert 0.0 <= secs < 5.0


def test_a_failed_stage_says_where_it_stopped(caplog):
    with caplog.at_level(logging.INFO, logger="engine.progress"):
        with pytest.raises(RuntimeError):
            with Progress(10, "bench", stream=io.StringIO()) as bar:
                bar.advance(4)
                raise RuntimeError("boom")
    last = [r for r in caplog.records if r.name == "engine.progress"][-1]
    assert last.levelno == logging.WARNING
    assert "bench: stopped at 4/10" in last.getMessage() and "RuntimeError" in last.getMessage()


def test_forced_off_bar_on_a_terminal_still_logs(caplog):
    stream = FakeTty()
    with caplog.at_level(logging.INFO, logger="engine.progress"):
        with Progress(1, "bake", stream=stream, enabled=False) as bar:
            bar.advance()
    assert stream.getvalue() == ""
    assert len([r for r in caplog.records if r.name == "engine.progress"]) == 2


def test_close_twice_logs_once(caplog):
    with caplog.at_level(logging.INFO, logger="engine.progress"):
        bar = Progress(1, "once", stream=io.StringIO())
        bar.advance()
        bar.close()
        bar.close()
    assert len([r for r in caplog.records if "once: 1/1" in r.getMessage()]) == 1


def test_fallback_handler_prints_only_when_logging_is_unconfigured(monkeypatch, capsys):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in a script that never configured logging
    with Progress(2, "unconfigured", stream=io.StringIO()) as bar:
        bar.advance(2)
    err = capsys.readouterr().err
    assert "engine.progress: unconfigured: started, 2 item(s)" in err
    assert "engine.progress: unconfigured: 2/2 done in" in err
    handler = logging.StreamHandler(io.StringIO())
    monkeypatch.setattr(root, "handlers", [handler])  # configured: the app's handler shows it
    with Progress(1, "configured", stream=io.StringIO()) as bar:
        bar.advance()
    assert "configured" not in capsys.readouterr().err
    assert "configured: 1/1 done" in handler.stream.getvalue()


def _run(code_or_args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENGINE_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, *code_or_args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_plain_script_sees_the_lines_on_stderr(tmp_path):
    proc = _run(["-c", "from engine.textures.progress import Progress\n"
                       "with Progress(2, 'script stage') as p: p.advance(2)"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "script stage: started, 2 item(s)" in proc.stderr
    assert "script stage: 2/2 done in" in proc.stderr
    assert "\r" not in proc.stderr  # piped: no bar redraws


@pytest.mark.slow
def test_cli_bake_log_shows_the_stage(tmp_path):
    """`engine bake` configures logging at WARNING; its stage lines still reach a CI log."""
    img = tmp_path / "tile.png"
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(img)
    proc = _run(["-m", "engine", "bake", str(img), "-o", str(tmp_path / "out"),
                 "--format", "bc1", "--jobs", "1"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "INFO engine.progress: bake: started, 1 item(s)" in proc.stderr
    assert "INFO engine.progress: bake: 1/1 done in" in proc.stderr
    assert (tmp_path / "out" / "tile.ktx2").is_file()


def test_log_lines_during_a_bar_do_not_break_it(monkeypatch, capsys):
    """While a bar is drawn, console log handlers write through tqdm (above the bar); the
    application's own handlers are back in place when the bar closes."""
    root = logging.getLogger()
    console = logging.StreamHandler(sys.stderr)
    monkeypatch.setattr(root, "handlers", [console])
    with Progress(2, "bake", stream=FakeTty()) as bar:
        assert root.handlers != [console]  # swapped for tqdm's handler
        logging.getLogger("engine.test").warning("a warning during the bar")
        bar.advance(2)
    assert root.handlers == [console]
    assert "a warning during the bar" in capsys.readouterr().err
