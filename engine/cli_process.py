"""Process supervision of the command line: SIGINT/SIGTERM become `Interrupted` in the main
thread after this process's worker processes are stopped (read from /proc), so every
`finally` runs and no pool outlives the command (the CLI rule, engine/cli.py).
"""
from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwinds the main thread (a BaseException, so library code
    catching Exception does not swallow it) and ends the command with 128 + signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def status(self) -> int:
        return 128 + self.signum


_MAIN_PID: int | None = None
_stopping = False


def child_pids(pid: int | None = None) -> list[int]:
    """Live child processes of `pid` (default: this process), from /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def stop_children(grace: float = 0.3) -> list[int]:
    """SIGTERM this process's children (pool workers), then SIGKILL those still alive after
    `grace` seconds: a worker inside a long C call (an encoder) runs no Python handler until
    it returns. The multiprocessing resource tracker is left to exit on its own."""
    pids = []
    for pid in child_pids():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" in cmd:
            continue
        pids.append(pid)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if set(child_pids()) & {p}}
        if alive:
            time.sleep(0.02)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def _on_signal(signum: int, frame: Any) -> None:
    global _stopping
    if os.getpid() != _MAIN_PID:
        # A forked worker (process pools fork with our handlers): the parent is stopping;
        # leave quietly instead of printing a KeyboardInterrupt traceback per worker.
        os._exit(128 + signum)
    if _stopping:  # a second signal while cleaning up: stop now
        os._exit(128 + signum)
    _stopping = True
    stop_children()
    # The exception unwinds whatever the main thread was in, even an object's registration
    # or its owner's release: what that leaves is released at the device's shutdown, and is
    # not the leak that report is for (a run that finished with objects still alive).
    logging.getLogger("engine.gl.device").setLevel(logging.ERROR)
    raise Interrupted(signum)


def install_signal_handlers() -> dict[int, Any]:
    """SIGINT/SIGTERM -> Interrupted in the main thread; returns the previous handlers."""
    global _MAIN_PID, _stopping
    _MAIN_PID, _stopping = os.getpid(), False
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, _on_signal)
    return previous


def stopping() -> bool:
    """Whether a SIGINT/SIGTERM arrived since the handlers were installed."""
    return _stopping
