"""Live state of every running engine process, for `python -m engine monitor`.

Each frame loop publishes a small JSON file, `<pid>.<n>.json`, in the user's runtime folder
(`$XDG_RUNTIME_DIR/engine-monitor`, or `<temp dir>/engine-monitor-<uid>` where there is no
runtime folder; mode 0700 either way): budget and effective budget, outside pressure, bytes
per ledger category, resident bytes per priority tier, page-cache slots, wanted versus
resident, reads and uploads in flight, read and upload MB/s, frame, CPU and GPU ms (p50/p99
over the last seconds), render scale and why. Why a file and not a socket: a reader needs no
protocol and no connection, a writer pays one small write a few times a second (at most
every `PUBLISH_EVERY_S`) whether anyone reads or not, and nothing listens on any port.
The file is memory-mapped and written under a sequence lock (`StateFile`): the writer's
update is a copy into memory, no system call (a write and a rename per update would go
through the file system each time), and a reader that catches a write half done reads again.

A process that ends normally removes its file; one that was killed leaves it, and the next
reader (`read_all`) removes the files whose process is gone (the pid is dead, or now belongs
to a process that started later: its start time is in the file).

Another local user. The folder is checked before use (engine.statedir: this user's, 0700,
not a symbolic link), files are made with O_EXCL and opened with O_NOFOLLOW, and what a
reader finds is hostile input: only regular files are opened (a FIFO named `*.json` is
skipped, never waited on), every document passes `live_entry.parse_entry` (bounded, finite,
a plausible pid, every key), a malformed one is skipped and named once, and the clean-up
deletes only the engine's own files: names of the engine's pattern (`PID.N.json`, its
snapshot request, its temporary file) whose content starts with the engine's magic (or, for
a temporary file, is still all zeros), never through a symbolic link.

`monitor --snapshot PID` drops a request file beside the state file; the publisher sees it
at its next write and calls the loop's snapshot writer (engine.diagnostics.snapshot).
"""
from __future__ import annotations

import itertools
import json
import logging
import mmap
import os
import re
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..statedir import is_own_regular, open_for_reading, open_state, plausible_pid, private_dir
from ..streaming.contract import ProviderStats
from .live_entry import EntryError, identity, parse_entry

log = logging.getLogger(__name__)

SCHEMA = 1
#: Seconds between two writes of a process's state file (the monitor refreshes every second).
PUBLISH_EVERY_S = 0.5
#: Frame times over this many seconds make the published percentiles.
WINDOW_S = 5.0
SNAPSHOT_REQUEST = ".snapshot-request"

_serials = itertools.count(1)
#: The state file: a header (magic, sequence number, payload length) and the JSON payload.
MAGIC = b"ENGMON1\0"
_HEADER = struct.Struct("<8sQI4x")
FILE_BYTES = 64 << 10


class StateFile:
    """A fixed-size memory-mapped file holding one JSON document under a sequence lock: the
    sequence number is odd while a write is under way and moves on every write, so a reader
    that sees it odd or changed across its read knows it read a mixture and reads again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        tmp = path.with_name(f".{path.name}.tmp")
        fd = open_state(tmp, create=True)
        try:
            os.ftruncate(fd, FILE_BYTES)
            self._map = mmap.mmap(fd, FILE_BYTES)
        finally:
            os.close(fd)
        self._seq = 0
        _HEADER.pack_into(self._map, 0, MAGIC, 0, 0)
        os.replace(tmp, path)  # appears whole, with an empty payload

    def write(self, payload: bytes) -> bool:
        """Publish `payload`; False (nothing written) when it does not fit the file."""
        if len(payload) > FILE_BYTES - _HEADER.size:
            return False
        m = self._map
        self._seq += 1  # odd: writing
        _HEADER.pack_into(m, 0, MAGIC, self._seq, 0)
        m[_HEADER.size:_HEADER.size + len(payload)] = payload
        self._seq += 1  # even: done
        _HEADER.pack_into(m, 0, MAGIC, self._seq, len(payload))
        return True

    def close(self) -> None:
        self._map.close()
        self.path.unlink(missing_ok=True)

    @staticmethod
    def read(path: Path, attempts: int = 20) -> dict[str, Any] | None:
        """The document, or None when the file holds none yet (or is not a state file)."""
        body = StateFile.read_body(path, attempts)
        return None if body is None else json.loads(body)

    @staticmethod
    def read_body(path: Path, attempts: int = 20) -> bytes | None:
        """The payload, or None when the file holds none yet, is no state file, is not a
        regular file of this user (a FIFO is never waited on) or is gone."""
        fd = open_for_reading(path)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as f:
            for _ in range(attempts):
                f.seek(0)
                head = f.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    return None
                magic, seq, n = _HEADER.unpack(head)
                if magic != MAGIC or seq == 0 or n > FILE_BYTES - _HEADER.size:
                    return None
                body = f.read(n)
                f.seek(0)
                again = _HEADER.unpack(f.read(_HEADER.size))[1]
                if seq % 2 == 0 and again == seq:
                    return body
                time.sleep(0.001)
        return None


def runtime_dir(create: bool = True) -> Path:
    """The folder state files live in: `$XDG_RUNTIME_DIR/engine-monitor` when the runtime
    folder exists, else `<tempfile.gettempdir()>/engine-monitor-<uid>`. Made with mode 0700;
    UnsafeStateError (an OSError) when another user could reach it (engine.statedir)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        path = Path(xdg) / "engine-monitor"
    else:
        path = Path(tempfile.gettempdir()) / f"engine-monitor-{os.getuid()}"
    return private_dir(path, create=create)


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux /proc), None elsewhere or
    when it is gone: with the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may itself hold spaces or parentheses
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc: its start in clock ticks against
    the system's uptime), so a time to first frame includes the interpreter's own start and
    the imports; None where /proc is missing."""
    start = process_start(os.getpid())
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return None if start is None else max(0.0, uptime - start / os.sysconf("SC_CLK_TCK"))


def process_alive(pid: int, start: int | None) -> bool:
    """Process `pid` (started at `start` clock ticks, when known) is running; False for a
    pid that cannot be an engine's (engine.statedir.plausible_pid)."""
    if not plausible_pid(pid):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: the engine run that wrote the file is gone
    return start is None or process_start(pid) in (None, start)


def _program() -> str:
    argv = [os.path.basename(sys.argv[0] or "python")] + sys.argv[1:]
    if argv[0] in ("__main__.py", "-m") and len(argv) > 1:
        argv = ["engine", *argv[1:]]
    return " ".join(argv)[:160]


def recent_times(frames: Sequence[Mapping[str, Any]],
                 seconds: float = WINDOW_S) -> dict[str, float | int | None]:
    """p50/p99 of frame, CPU and GPU milliseconds over the newest frames that add up to
    `seconds` of frame time, read from the loop's own records when a state is published (so
    a frame that publishes nothing costs nothing here)."""
    series: dict[str, list[float]] = {"ms": [], "cpu_ms": [], "gpu_ms": []}
    spent = 0.0
    for f in reversed(frames):
        ms = float(f["ms"])
        series["ms"].append(ms)
        series["cpu_ms"].append(float(f.get("cpu_ms", ms)))
        if f.get("gpu_ms") is not None:
            series["gpu_ms"].append(float(f["gpu_ms"]))
        spent += ms
        if spent >= seconds * 1000.0:
            break
    out: dict[str, float | int | None] = {"frames": len(series["ms"])}
    for name, values in series.items():
        values.sort()
        out[f"{name}_p50"] = _quantile(values, 0.50)
        out[f"{name}_p99"] = _quantile(values, 0.99)
    return out


def _quantile(ordered: list[float], q: float) -> float | None:
    """numpy's default (linear) percentile of sorted values: a few hundred frames sorted in
    Python cost less than numpy's percentile machinery, on the render thread."""
    if not ordered:
        return None
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def live_state(record: Mapping[str, Any], stats: ProviderStats, by_category: Mapping[str, int],
               times: Mapping[str, Any], rates: Mapping[str, float]) -> dict[str, Any]:
    """The published figures, from the frame loop's record of the frame just finished, the
    provider's stats, the ledger's bytes by category now and the recent frame times."""
    return {
        "frame": int(record["frame"]),
        "budget_bytes": int(record["budget_bytes"]),
        "effective_budget_bytes": int(record.get("effective_budget_bytes",
                                                 record["budget_bytes"])),
        "external_pressure_bytes": int(record.get("external_pressure_bytes", 0)),
        "vram_note": str(record.get("vram_note") or ""),
        "total_bytes": int(sum(by_category.values())),
        "by_category": {str(k): int(v) for k, v in by_category.items()},
        "pool_bytes": int(record.get("pool_bytes", 0)),
        "resident_bytes": stats.resident_bytes, "wanted_bytes": stats.wanted_bytes,
        "resident_by_tier": dict(stats.resident_by_tier),
        "cache_slots": stats.cache_slots, "cache_slots_used": stats.cache_slots_used,
        "missing_tiles": stats.missing_tiles,
        "reads_in_flight": stats.reads_in_flight, "uploads_in_flight": stats.pending_uploads,
        "read_mb_s": rates.get("read_mb_s", 0.0), "upload_mb_s": rates.get("upload_mb_s", 0.0),
        "textures": stats.textures,
        "render_scale": float(record["render_scale"]),
        "scale_reason": str(record.get("scale_reason", "")),
        "times": dict(times),
    }


class LivePublisher:
    """One frame loop's state file. `frame(...)` every frame; it writes only when
    `PUBLISH_EVERY_S` has passed. `close()` removes the file."""

    def __init__(self, folder: Path, *, program: str | None = None, renderer: str = "",
                 on_snapshot: Callable[[Path], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.folder = folder
        self.pid = os.getpid()
        self.name = f"{self.pid}.{next(_serials)}"
        self.path = folder / f"{self.name}.json"
        self.request = folder / f"{self.name}{SNAPSHOT_REQUEST}"
        self.on_snapshot = on_snapshot
        self.clock = clock
        self._head = {"schema": SCHEMA, "pid": self.pid, "start": process_start(self.pid),
                      "name": self.name, "program": program or _program(),
                      "renderer": renderer,  # the monitor matches it to an NVML GPU
                      "started_utc": time.time()}
        self._next = 0.0
        self._last: tuple[float, int, int] | None = None  # time, bytes read, bytes uploaded
        self.writes = 0
        self._said_too_large = False
        self._file: StateFile | None = StateFile(self.path)

    @classmethod
    def start(cls, **kw: Any) -> LivePublisher | None:
        """A publisher in the user's runtime folder; None (and one warning) when it cannot
        be made: a run never fails because nobody can monitor it."""
        try:
            return cls(runtime_dir(), **kw)
        except OSError as exc:
            log.warning("live monitor state not published: %s", exc)
            return None

    def frame(self, frames: Sequence[Mapping[str, Any]], stats: ProviderStats,
              by_category: Callable[[], Mapping[str, int]]) -> None:
        """After each frame: `frames` are the loop's records, the newest last."""
        now = self.clock()
        if now < self._next:
            return
        record = frames[-1]
        self._next = now + PUBLISH_EVERY_S
        rates: dict[str, float] = {}
        if self._last is not None and now > self._last[0]:
            dt = now - self._last[0]
            rates = {"read_mb_s": (stats.bytes_read - self._last[1]) / dt / 1e6,
                     "upload_mb_s": (stats.bytes_uploaded - self._last[2]) / dt / 1e6}
        self._last = (now, stats.bytes_read, stats.bytes_uploaded)
        state = {**self._head, "updated_utc": time.time(),
                 **live_state(record, stats, by_category(), recent_times(frames), rates)}
        self._write(state)
        if self.on_snapshot is not None and self.request.exists():
            self._serve_snapshot()

    def _write(self, state: Mapping[str, Any]) -> None:
        if self._file is None:
            return
        if self._file.write(json.dumps(state).encode("utf-8")):
            self.writes += 1
        elif not self._said_too_large:  # once: the next state is as large
            log.warning("live monitor state larger than %d bytes: not published", FILE_BYTES)
            self._said_too_large = True

    def _serve_snapshot(self) -> None:
        try:
            fd = open_state(self.request, create=False)
            with os.fdopen(fd, "rb") as f:
                target = Path(f.read(4096).decode("utf-8").strip())
            self.request.unlink(missing_ok=True)
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("snapshot request unreadable: %s", exc)
            return
        try:
            assert self.on_snapshot is not None
            self.on_snapshot(target)
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the run
            log.error("snapshot to %s failed: %s", target, exc)
            try:  # the monitor waiting for it reads why
                target.with_name(target.name + ".failed").write_text(str(exc), encoding="utf-8")
            except OSError:
                pass  # it times out and says so; the run goes on either way

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        for path in (self.path, self.request, self.folder / f".{self.name}.json.tmp"):
            path.unlink(missing_ok=True)


def read_all(folder: Path | None = None, *, clean: bool = True) -> list[dict[str, Any]]:
    """The state of every live engine process, oldest first; with `clean`, the files of
    processes that are gone are removed (a killed process cannot remove its own), and only
    those (module docstring, "Another local user")."""
    folder = private_dir(folder, create=False) if folder is not None else runtime_dir()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        match = _STATE_NAME.fullmatch(path.name)
        if match is None or not is_own_regular(path):
            _skip_once(path, "not an engine state file (name or file type)")
            continue
        body = StateFile.read_body(path)
        state: dict[str, Any] | None = None
        pid, start = int(match[1]), None
        if body is not None:
            try:
                state = parse_entry(body)
                pid, start = state["pid"], state.get("start")
            except EntryError as exc:
                _skip_once(path, str(exc))
                pid, start = identity(body) or (pid, None)
        if not process_alive(pid, start):
            if clean and _has_magic(path):  # the engine's own file (its name and magic)
                _remove_stale(folder, path.stem)
            continue
        if state is not None:
            out.append(state)
    if clean:  # a file being made when its process was killed never got its real name
        for tmp in folder.glob(".*.json.tmp"):
            match = _STATE_NAME.fullmatch(tmp.name[1:-4])
            if match and not process_alive(int(match[1]), None) and _is_own_temp(tmp):
                tmp.unlink(missing_ok=True)
    return sorted(out, key=lambda s: (s.get("started_utc", 0), s.get("name", "")))


#: The name of a state file: PID.N.json.
_STATE_NAME = re.compile(r"([0-9]{1,10})\.([0-9]{1,10})\.json")
_skipped: set[str] = set()


def _skip_once(path: Path, why: str) -> None:
    if str(path) not in _skipped:
        _skipped.add(str(path))
        log.warning("monitor: skipped %s: %s", path, why)


def _remove_stale(folder: Path, stem: str) -> None:
    """The state file `stem`.json of a process that is gone, its snapshot request and its
    temporary file: regular files of this user only (unlink never follows a link itself)."""
    for name in (f"{stem}.json", f"{stem}{SNAPSHOT_REQUEST}"):
        path = folder / name
        if is_own_regular(path):
            path.unlink(missing_ok=True)
    tmp = folder / f".{stem}.json.tmp"
    if _is_own_temp(tmp):
        tmp.unlink(missing_ok=True)


def _has_magic(path: Path) -> bool:
    """`path` is a regular file of this user starting with the state file's magic."""
    fd = open_for_reading(path)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def _is_own_temp(path: Path) -> bool:
    """A temporary state file: a regular file of this user of the state file's size (or
    empty) whose header is the engine's or still zeros (killed before writing it)."""
    if not is_own_regular(path) or os.lstat(path).st_size not in (0, FILE_BYTES):
        return False
    fd = open_for_reading(path)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as f:
        head = f.read(_HEADER.size)
    return head[:8] == MAGIC or not head.strip(b"\0")
