"""`python -m engine monitor`: every engine process on this machine, refreshed every second.

Like `nvidia-smi -l 1`, for the engine's own figures: each frame loop publishes its state
(engine.diagnostics.live) and this command reads all of them, adding NVML's view of each
process's GPU where NVIDIA's driver library is present (used, this process, the others). On a terminal it draws a table
with `rich` (the `monitor` extra: `pip install vram-budget-renderer[monitor]`; without it,
plain text); `--json` (the default when stdout is not a terminal) prints one JSON object per
process per refresh, one per line; `--once` prints once and exits. A process that has died
disappears, and its state file is removed.

`--snapshot PID` asks that process (every frame loop in it) for a snapshot of who holds what
(engine.diagnostics.snapshot) and waits for the files: PID.snapshot.json and .html in the
current folder, or `--out PATH`.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import UsageError
from ..memory.sizes import format_bytes
from ..statedir import open_state
from .live import SNAPSHOT_REQUEST, read_all, runtime_dir

#: Seconds `--snapshot` waits for the process to write the files.
SNAPSHOT_WAIT_S = 30.0


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _mb(v: float) -> str:
    return f"{v:.1f}"


def _tiers(state: Mapping[str, Any]) -> str:
    t = state.get("resident_by_tier") or {}
    if not t:
        return "-"
    return " ".join(f"{k[:3]} {format_bytes(int(t.get(k, 0)))}"
                    for k in ("visible", "prefetch", "recent") if k in t)


def text_lines(states: Sequence[Mapping[str, Any]]) -> list[str]:
    """The refresh as plain lines (no terminal library): one block per process."""
    if not states:
        return ["no engine process is running"]
    out = []
    for s in states:
        times = s.get("times", {})
        cats = ", ".join(f"{k} {format_bytes(int(v))}" for k, v in s["by_category"].items() if v)
        out += [
            f"pid {s['pid']}  {s['program']}  frame {s['frame']}",
            f"  memory {format_bytes(s['total_bytes'])} / budget {format_bytes(s['budget_bytes'])}"
            f" (effective {format_bytes(s['effective_budget_bytes'])}, outside "
            f"{format_bytes(s['external_pressure_bytes'])})  {cats}",
            f"  textures resident {format_bytes(s['resident_bytes'])} of "
            f"{format_bytes(s['wanted_bytes'])} wanted; tiers {_tiers(s)}; page cache "
            f"{s['cache_slots_used']}/{s['cache_slots']} slots",
            f"  reads {s['reads_in_flight']} uploads {s['uploads_in_flight']} in flight, "
            f"read {_mb(s['read_mb_s'])} MB/s upload {_mb(s['upload_mb_s'])} MB/s",
            f"  frame ms p50 {_ms(times.get('ms_p50'))} p99 {_ms(times.get('ms_p99'))}, cpu "
            f"{_ms(times.get('cpu_ms_p50'))}/{_ms(times.get('cpu_ms_p99'))}, gpu "
            f"{_ms(times.get('gpu_ms_p50'))}/{_ms(times.get('gpu_ms_p99'))}; scale "
            f"{s['render_scale']:.2f} ({s['scale_reason'] or '-'})",
        ]
        if _nvml_line(s):
            out.append(f"  {_nvml_line(s)}")
    return out


def rich_table(states: Sequence[Mapping[str, Any]]) -> Any:
    """The refresh as a rich Table (one row per process)."""
    from rich.table import Table

    table = Table(title=f"engine processes  {time.strftime('%H:%M:%S')}", expand=True)
    for name, justify in (("pid", "right"), ("program", "left"), ("memory / budget", "right"),
                          ("by category", "left"), ("textures res/wanted", "right"),
                          ("tiers", "left"), ("cache", "right"), ("in flight r/u", "right"),
                          ("MB/s r/u", "right"), ("ms p50/p99 cpu gpu", "right"),
                          ("scale", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for s in states:
        t = s.get("times", {})
        over = s["total_bytes"] > s["effective_budget_bytes"]
        mem = (f"{format_bytes(s['total_bytes'])} / {format_bytes(s['budget_bytes'])}"
               + (f"\neff {format_bytes(s['effective_budget_bytes'])}"
                  if s["effective_budget_bytes"] != s["budget_bytes"] else "")
               + (f"\noutside {format_bytes(s['external_pressure_bytes'])}"
                  if s["external_pressure_bytes"] else ""))
        table.add_row(
            str(s["pid"]), s["program"], f"[red]{mem}[/]" if over else mem,
            "\n".join(f"{k} {format_bytes(int(v))}" for k, v in s["by_category"].items() if v),
            f"{format_bytes(s['resident_bytes'])}\n{format_bytes(s['wanted_bytes'])}",
            _tiers(s), f"{s['cache_slots_used']}/{s['cache_slots']}",
            f"{s['reads_in_flight']}/{s['uploads_in_flight']}",
            f"{_mb(s['read_mb_s'])}/{_mb(s['upload_mb_s'])}",
            f"{_ms(t.get('ms_p50'))}/{_ms(t.get('ms_p99'))}\ncpu {_ms(t.get('cpu_ms_p50'))} "
            f"gpu {_ms(t.get('gpu_ms_p50'))}",
            f"{s['render_scale']:.2f} {s['scale_reason']}")
    notes = sorted({_nvml_line(s) for s in states} - {""})
    if notes or not states:
        table.caption = "\n".join(notes) if states else "no engine process is running"
    return table


def with_nvml(states: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each state with NVML's view of its GPU added as "nvml" (used and free bytes, what NVML
    charges the process, the other processes holding memory), or why there is none: read
    here, in the monitor, so the engine pays nothing for it."""
    from ..memory.nvml import NvmlProbe

    for state in states:
        probe = NvmlProbe.open(renderer=state.get("renderer") or None, pid=int(state["pid"]))
        reading = probe if not isinstance(probe, NvmlProbe) else probe.read()
        if isinstance(probe, NvmlProbe):
            probe.close()
        state["nvml"] = reading.as_dict()
    return states


def _nvml_line(state: Mapping[str, Any]) -> str:
    nv = state.get("nvml") or {}
    if not nv.get("total_bytes"):
        return str(nv.get("reason", ""))
    return (f"NVML: {format_bytes(nv['used_bytes'])} used of {format_bytes(nv['total_bytes'])}, "
            f"this process {format_bytes(nv.get('self_bytes'))}, others "
            f"{format_bytes(nv.get('others_bytes', 0))}")


def _have_rich() -> bool:
    import importlib.util

    return importlib.util.find_spec("rich") is not None


def watch(*, as_json: bool, once: bool, interval: float = 1.0, out: TextIO | None = None,
          folder: Path | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Print the state of every engine process, every `interval` seconds (once with
    `once`) until interrupted."""
    out = out or sys.stdout
    folder = folder or runtime_dir()
    if not as_json and not once and out.isatty() and _have_rich():
        from rich.live import Live

        with Live(rich_table(with_nvml(read_all(folder))), refresh_per_second=4,
                  screen=False) as live:
            while True:
                sleep(interval)
                live.update(rich_table(with_nvml(read_all(folder))))
    while True:
        states = with_nvml(read_all(folder))
        if as_json:
            for s in states:  # finite numbers only (live_entry): strict JSON out
                out.write(json.dumps(s, allow_nan=False) + "\n")
        elif out.isatty() and _have_rich():
            from rich.console import Console

            Console(file=out).print(rich_table(states))
        else:
            out.write("\n".join(text_lines(states)) + "\n")
        out.flush()
        if once:
            return 0
        sleep(interval)


def request_snapshot(pid: int, target: Path, *, folder: Path | None = None,
                     wait_s: float = SNAPSHOT_WAIT_S,
                     sleep: Callable[[float], None] = time.sleep) -> list[Path]:
    """Ask every frame loop of process `pid` for a snapshot; returns the JSON files written
    (TARGET, or TARGET-2, ... when the process runs several loops)."""
    folder = folder or runtime_dir()
    loops = [s for s in read_all(folder) if int(s["pid"]) == pid]
    if not loops:
        raise UsageError(f"--snapshot {pid}: no engine process with that pid is running "
                         f"(see `python -m engine monitor --once`)")
    wanted: dict[Path, tuple[int, int] | None] = {}  # path -> what was there before asking
    for i, state in enumerate(loops):
        path = target if i == 0 else target.with_name(f"{target.stem}-{i + 1}{target.suffix}")
        path = path.resolve()
        wanted[path] = _identity(path)  # kept: the process replaces it once it has written
        wanted[path.with_name(path.name + ".failed")] = _identity(
            path.with_name(path.name + ".failed"))
        req = folder / f"{state['name']}{SNAPSHOT_REQUEST}"
        tmp = req.with_name(req.name + ".tmp")
        fd = open_state(tmp, create=True)
        with os.fdopen(fd, "wb") as f:
            f.truncate(0)
            f.write(str(path).encode("utf-8"))
        os.replace(tmp, req)
    outputs = [p for p in wanted if not p.name.endswith(".failed")]
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        failed = [p for p in outputs if _new(p.with_name(p.name + ".failed"), wanted)]
        if failed:
            reason = failed[0].with_name(failed[0].name + ".failed").read_text("utf-8")
            raise UsageError(f"--snapshot {pid}: the process could not write "
                             f"{failed[0]}: {reason}")
        if all(_new(p, wanted) for p in outputs):
            return outputs
        if not any(int(s["pid"]) == pid for s in read_all(folder)):
            raise UsageError(f"--snapshot {pid}: the process ended before it wrote the snapshot")
        sleep(0.1)
    raise UsageError(f"--snapshot {pid}: no snapshot after {wait_s:.0f} s (is its frame loop "
                     f"stalled?)")


def _identity(path: Path) -> tuple[int, int] | None:
    """(inode, mtime in ns) of `path`, None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _new(path: Path, before: Mapping[Path, tuple[int, int] | None]) -> bool:
    """`path` exists and is not the file that was there before the request."""
    now = _identity(path)
    return now is not None and now != before[path]
