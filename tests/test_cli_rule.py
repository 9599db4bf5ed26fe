"""The CLI rule (engine/cli.py's docstring), held for every subcommand and every option.

`test_every_option_refuses_its_bad_values` walks the parsers' `_actions`, so an option added
later is covered as soon as it exists: it must declare what it accepts (choices, or an
argument type carrying `bad_examples`), and each bad value must end in one line on stderr
naming the option, exit status 2, no traceback. The regression tests below are the examples
of issue 15, one by one. Everything that fails in parsing runs in-process (no work starts);
runs that must get past parsing are subprocesses."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine import cli, cli_args, inputs
from lab.cli import LAB

ROOT = Path(__file__).resolve().parents[1]
SKIP_ACTIONS = (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction,
                argparse._StoreConstAction, argparse._VersionAction, argparse._SubParsersAction)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser by name: the engine's and the lab's (`python -m lab`)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for program in (cli.ENGINE, LAB):
        root = cli.build_parser(program)
        sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
        out.update(sub.choices)
    return out


def _flag(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else ""


def _good(action: argparse.Action) -> str:
    kind = action.type
    if action.choices is not None and not hasattr(kind, "good_example"):
        return str(next(iter(action.choices)))
    return str(kind.good_example)


def _required_args(parser: argparse.ArgumentParser, skip: argparse.Action) -> list[str]:
    """Valid values for the positionals and required options other than `skip`."""
    args: list[str] = []
    for a in parser._actions:
        if a is skip or isinstance(a, SKIP_ACTIONS):
            continue
        if not a.option_strings and a.nargs not in ("*", "?"):
            args.append(_good(a))
        elif a.option_strings and a.required:
            args += [_flag(a), _good(a)]
    return args


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for name, parser in _parsers().items():
        for action in parser._actions:
            if isinstance(action, SKIP_ACTIONS):
                continue
            bad = getattr(action.type, "bad_examples", None)
            if bad is None and action.choices is not None:
                bad = ("bogus-choice",)
            assert bad, (f"{name} {_flag(action) or action.dest}: declares neither choices nor a "
                         f"checked type (engine.cli argument types)")
            for value in bad:
                cases.append((name, action.dest, value))
    return cases


def _run_main(argv: list[str], capsys) -> tuple[int, str]:
    program = LAB if argv and argv[0] in ("bench", "soak") else cli.ENGINE
    rc = cli.main(argv, program)
    err = capsys.readouterr().err
    return rc, err


def _assert_user_error(rc: int, err: str, *names: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert any(n in lines[0] for n in names), (names, lines[0])
    return lines[0]


def test_every_subcommand_is_walked():
    names = set(_parsers())
    assert {"info", "demo", "view", "bake", "inspect", "bench", "report", "soak",
            "monitor"} <= names
    assert len(_cases()) > 40  # the walk really reaches the options


@pytest.mark.parametrize("command,dest,value", _cases())
def test_every_option_refuses_its_bad_values(command, dest, value, capsys, tmp_path,
                                             monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    parser = _parsers()[command]
    action = next(a for a in parser._actions if a.dest == dest)
    required = _required_args(parser, action)
    if action.option_strings:
        argv = [command, *required, f"{_flag(action)}={value}"]
    else:
        argv = [command, value, *required]
    rc, err = _run_main(argv, capsys)
    named = [*action.option_strings, action.metavar or action.dest, action.dest]
    _assert_user_error(rc, err, *[n for n in named if n])
    assert not (tmp_path / "cache").exists()  # nothing generated before the check


# ----------------------------------------------------------------- issue 15, one by one
@pytest.mark.parametrize("budget", ["abc", "-5%", "150%", "nan%", "0"])
def test_budget_values(budget, capsys):
    rc, err = _run_main(["demo", "gallery", f"--budget={budget}"], capsys)
    line = _assert_user_error(rc, err, "--budget")
    assert "(0, 100]" in line


def test_size_too_large(capsys):
    rc, err = _run_main(["demo", "gallery", "--size", "99999x99999"], capsys)
    line = _assert_user_error(rc, err, "--size")
    assert str(inputs.MAX_OUTPUT_EDGE) in line


def test_size_beyond_memory(capsys, monkeypatch):
    monkeypatch.setattr(cli_args, "machine_memory", lambda: 64 << 20)
    rc, err = _run_main(["demo", "gallery", "--size", "4096x4096"], capsys)
    assert "memory" in _assert_user_error(rc, err, "--size")


def test_provider_and_upscale_from_their_registries(capsys):
    from engine.app.providers import PROVIDERS
    from engine.resolution.upscale import MODES

    rc, err = _run_main(["demo", "gallery", "--provider", "bogus"], capsys)
    line = _assert_user_error(rc, err, "--provider")
    assert all(name in line for name in PROVIDERS)
    rc, err = _run_main(["demo", "gallery", "--upscale", "bogus"], capsys)
    line = _assert_user_error(rc, err, "--upscale")
    assert all(name in line for name in MODES)


def test_texture_size_not_power_of_two_leaves_no_cache_folder(capsys, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENGINE_CACHE", str(cache))
    rc, err = _run_main(["demo", "gallery", "--texture-size", "3"], capsys)
    assert "power of two" in _assert_user_error(rc, err, "--texture-size")
    assert not cache.exists()


@pytest.mark.parametrize("argv", [["--frames", "-1"], ["--frames", "0"], ["--count", "-3"]])
def test_counts_and_frames_positive(argv, capsys):
    rc, err = _run_main(["demo", "gallery", *argv], capsys)
    assert "1 or more" in _assert_user_error(rc, err, argv[0])


def test_unknown_demo_names_the_known_ones(capsys):
    rc, err = _run_main(["demo", "nope"], capsys)
    assert "gallery" in _assert_user_error(rc, err, "name")


def test_bake_output_is_a_file(capsys, tmp_path):
    image = tmp_path / "a.png"
    image.write_bytes(b"not read: the check comes first")
    target = tmp_path / "file"
    target.write_text("x")
    rc, err = _run_main(["bake", str(image), "-o", str(target)], capsys)
    assert "not a folder" in _assert_user_error(rc, err, "-o", "--out")
    assert target.read_text() == "x"


def test_output_under_a_regular_file(capsys, tmp_path):
    blocker = tmp_path / "plain"
    blocker.write_text("x")
    rc, err = _run_main(["demo", "gallery", "--report", str(blocker / "r.json")], capsys)
    _assert_user_error(rc, err, "--report")
    image = tmp_path / "a.png"
    image.write_bytes(b"x")
    rc, err = _run_main(["bake", str(image), "-o", str(blocker / "out")], capsys)
    _assert_user_error(rc, err, "-o", "--out")


def test_unwritable_output_folder(capsys, tmp_path, monkeypatch):
    """Tests run as root, whom chmod does not stop: the permission answer is mocked."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real = os.access
    monkeypatch.setattr(cli_args.os, "access", lambda p, mode: False if Path(p) == folder
                        else real(p, mode))
    rc, err = _run_main(["demo", "gallery", "--screenshot", str(folder / "s.png")], capsys)
    assert "not writable" in _assert_user_error(rc, err, "--screenshot")


def test_unwritable_output_folder_non_root(capsys, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere: see the mocked test above")
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    rc, err = _run_main(["demo", "gallery", "--screenshot", str(folder / "s.png")], capsys)
    _assert_user_error(rc, err, "--screenshot")


def test_report_size_too_large(capsys, tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"summary": {}, "frames": []}))
    rc, err = _run_main(["report", str(report), "--size", "99999x99999"], capsys)
    _assert_user_error(rc, err, "--size")


def test_a_parse_error_is_one_line_not_a_usage_block(capsys):
    rc, err = _run_main(["demo"], capsys)
    _assert_user_error(rc, err, "name")
    rc, err = _run_main(["no-such-command"], capsys)
    _assert_user_error(rc, err, "no-such-command")


def test_internal_error_one_line_unless_debug(capsys, monkeypatch):
    def broken(args):
        raise RuntimeError("something inside broke")

    from engine.commands import info

    monkeypatch.setattr(info, "run", broken)
    rc, err = _run_main(["info"], capsys)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and "Traceback" not in err
    assert "something inside broke" in lines[0] and "--debug" in lines[0]
    rc, err = _run_main(["info", "--debug"], capsys)
    assert rc == 1 and "Traceback" in err and "something inside broke" in err


def _ktx2(path: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from texture_helpers import ktx2_for

    data, _ = ktx2_for("BC7", 64, 64, levels=7)
    path.write_bytes(data)
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["ENGINE_CACHE"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


@pytest.mark.slow
def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path):
    """`inspect f.ktx2 | head -3`: the reader leaves after three lines."""
    f = _ktx2(tmp_path / "t.ktx2")
    proc = subprocess.Popen([sys.executable, "-m", "engine", "inspect", *[str(f)] * 600],
                            cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    head = [proc.stdout.readline() for _ in range(3)]
    proc.stdout.close()
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=60)
    assert head[0].startswith(str(f).encode()) and len(head) == 3
    assert err == "" and rc == 128 + signal.SIGPIPE


def test_inspect_missing_file(capsys):
    rc, err = _run_main(["inspect", "/nonexistent/f.ktx2"], capsys)
    _assert_user_error(rc, err, "files")


SMALL = ["--frames", "2", "--count", "2", "--texture-size", "32", "--size", "64x48"]


@pytest.mark.slow
@pytest.mark.parametrize("display", [":93", "localhost:93.0"])
def test_display_without_x_server_falls_back_to_headless(tmp_path, display):
    """A local display number with no socket is detected without trying; a TCP one is
    tried and its ContextError answered. Either way: one warning line, a headless run."""
    if display == ":93" and Path("/tmp/.X11-unix/X93").exists():
        pytest.skip("display :93 exists here")
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "engine", "demo", "gallery", *SMALL,
                           "--report", str(report)], cwd=ROOT, env=_env(tmp_path, DISPLAY=display),
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("WARNING")
                and "are served as" not in ln]  # a lesser driver's format fallback
    assert len(warnings) == 1 and "headless" in warnings[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(report.read_text())["summary"]["frames"] == 2


@pytest.mark.slow
def test_demo_says_what_it_does_and_where_outputs_went(tmp_path):
    """Piped (not a terminal): a line when rendering starts, the output paths at the end, and
    the report carries the metadata block."""
    report, shot = tmp_path / "out" / "g.json", tmp_path / "out" / "g.png"
    proc = subprocess.run([sys.executable, "-m", "engine", "demo", "gallery", *SMALL,
                           "--report", str(report), "--screenshot", str(shot)], cwd=ROOT,
                          env=_env(tmp_path), capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "rendering: frame 1/2 at 64x48" in proc.stderr
    assert f"screenshot written to {shot}" in proc.stderr
    assert f"report written to {report}" in proc.stderr
    assert json.loads(proc.stdout)["frames"] == 2  # stdout: the summary only
    meta = json.loads(report.read_text())["metadata"]
    assert meta["scene"] == "gallery" and meta["options"]["size"] == [64, 48]
    assert meta["renderer"] and meta["gl_version"] and "demo" in meta["command"]
    assert sorted(p.name for p in shot.parent.iterdir()) == ["g.json", "g.png"]  # no temps


def test_run_scene_checks_the_drivers_size_limit_before_making_anything(device):
    """Past the parser's GL-4.5 bound, the run itself asks the driver (GL_MAX_TEXTURE_SIZE,
    GL_MAX_RENDERBUFFER_SIZE, GL_MAX_VIEWPORT_DIMS) before the scene or a target exists."""
    from engine.hosts.run import run_scene
    from engine.errors import UsageError
    from engine.gl.limits import max_output_size

    mw, mh = max_output_size(device)
    assert mw >= inputs.MAX_OUTPUT_EDGE and mh >= inputs.MAX_OUTPUT_EDGE  # GL 4.5's minimum holds
    built = []
    before = device.ledger.total
    with pytest.raises(UsageError, match=f"at most {mw}x{mh}"):
        run_scene(lambda *a: built.append(a), size=(mw + 1, 16), device=device)
    assert built == [] and device.ledger.total == before
