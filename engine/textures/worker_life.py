"""Pool workers that end with the process that made their pool, also when it is killed.

Why. A SIGKILL of `engine view` left its workers, the fork server and the resource tracker
alive (about 70 MB, for as long as anyone measured): a worker blocks reading its task queue,
whose write end it holds itself, so it never sees an end of file; the fork server stays while
a worker holds its liveness pipe; the resource tracker stays while either holds its pipe.
Ending the workers ends the other two. `watch_owner` is a pool initializer: the kernel's
parent-death signal where the owner is the worker's parent (a spawned worker; a fork
server's worker has the server as parent), and in every case a thread that waits on a pidfd
of the owner (one blocking poll, no CPU) and ends the worker when the owner is gone.
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time

#: prctl(2) option: the signal this process gets when its parent thread ends.
PR_SET_PDEATHSIG = 1
#: Seconds between two checks where there is no pidfd (Linux < 5.3, other systems).
POLL_S = 1.0


def watch_owner(owner: int) -> None:
    """Pool initializer: end this process (exit status 1, no clean-up: the owner that would
    collect its results is gone) when process `owner` ends."""
    if owner == os.getppid():
        _death_signal()
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        os._exit(1)  # gone before this worker started
    except (AttributeError, OSError):
        fd = -1
    threading.Thread(target=_wait_for_end, args=(owner, fd), name="engine-owner-watch",
                     daemon=True).start()


def _death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the watching thread still ends it


def _wait_for_end(owner: int, fd: int) -> None:
    if fd >= 0:
        poll = select.poll()
        poll.register(fd, select.POLLIN)
        while not poll.poll():  # readable once the owner has exited
            pass
    else:
        while pid_alive(owner):
            time.sleep(POLL_S)
    os._exit(1)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (of any user: another's answers PermissionError) and is
    not a zombie: in a container whose first process reaps no orphans, a killed run's
    workers stay zombies for good, and their temporary files would never be swept."""
    if not 0 < pid < 1 << 22:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Linux's /proc says the process has ended and waits to be reaped (False elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"Z"
