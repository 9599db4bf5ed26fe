"""Pool workers end with the process that made the pool, also on SIGKILL (issue 35): a
killed `engine view` used to leave a worker, the fork server and the resource tracker."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from process_helpers import ROOT

OWNER = """
import os, time
from engine.view.encoder import process_pool
if __name__ == "__main__":
    pool = process_pool(1)
    print(pool.submit(os.getpid).result(), flush=True)
    time.sleep(60)
"""


def _children(pid: int) -> set[int]:
    """Every process whose parent is `pid`, and theirs."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    parent = {int(a): int(b) for a, b in (line.split() for line in out.splitlines())}
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parent.items() if pp == p}
        todo += list(kids - found)
        found |= kids
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfds and prctl: Linux")
def test_workers_fork_server_and_tracker_end_when_the_owner_is_killed(tmp_path):
    script = tmp_path / "owner.py"
    script.write_text(OWNER)
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    helpers: set[int] = set()
    try:
        worker = int(owner.stdout.readline())
        helpers = _children(owner.pid)
        assert worker in helpers and len(helpers) >= 3  # tracker, fork server, worker
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_exists(p) for p in helpers):
            time.sleep(0.05)
        assert not [p for p in helpers if _exists(p)]
    finally:
        for pid in helpers:
            if _exists(pid):
                os.kill(pid, signal.SIGKILL)
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] not in "ZX"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_zombie_is_not_alive():
    """A process that ended and was not reaped yet (what a killed run's workers stay in a
    container whose first process reaps no orphans) is no writer: its files may be swept."""
    from engine.textures.worker_life import pid_alive

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        end = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < end:
            time.sleep(0.01)
        assert not pid_alive(pid)
        assert os.waitpid(pid, os.WNOHANG)[0] == pid  # it was a zombie until now
    finally:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    assert pid_alive(os.getpid())
