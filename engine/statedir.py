"""Folders and files of state shared between this user's engine processes, made safe on a
machine shared with other users.

Why. Share groups and the monitor's state files live in `$XDG_RUNTIME_DIR` or, without
one, in the system's temporary folder, where any local user can create names first. A
folder someone else made (or a symbolic link to a folder of the victim's) turned the
engine's writes into writes of files it never meant to touch, and its clean-up into
deletions of them. The rules here are those of `$XDG_RUNTIME_DIR` itself and of OpenSSH's
checks: a state folder is checked with `lstat` (not a symbolic link, a folder, owned by this
user, mode 0700) before any use and made 0700 when missing; its parent must not let others
rename it away (owned by this user or root, and sticky when others may write it); a file in
it is opened with `O_NOFOLLOW` (and made with `O_CREAT | O_EXCL`, mode 0600), then checked
with `fstat` (a regular file of this user). Anything else raises `UnsafeStateError`, one line
naming the path. Reading a file never blocks on a FIFO planted under a file's name
(`O_NONBLOCK`, then the `fstat` check refuses it).
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import UnsafeStateError

#: Flags every open of a state file carries: no symlink is followed, no FIFO blocks the
#: open, and no child process inherits the descriptor.
_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def private_dir(path: Path, *, create: bool = True) -> Path:
    """`path`, checked to be a folder only this user can use; made (mode 0700) when missing
    and `create`. UnsafeStateError otherwise. Without `create`, a missing folder is returned
    as it is (its caller finds nothing in it)."""
    check_parent(path.parent)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return path
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # made by another process of ours a moment ago: checked below like any
        st = os.lstat(path)
    check_dir(path, st)
    return path


def check_dir(path: Path, st: os.stat_result) -> None:
    """UnsafeStateError unless `st` (from lstat) is a folder of this user with mode 0700."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeStateError(path, "is a symbolic link, not a folder of this user")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeStateError(path, "is not a folder")
    if st.st_uid != os.getuid():
        raise UnsafeStateError(path, f"belongs to uid {st.st_uid}, not to this user "
                                     f"(uid {os.getuid()})")
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        raise UnsafeStateError(path, f"has mode {mode:04o}, not 0700 (others could plant or "
                                     f"read files in it)")


def check_parent(parent: Path) -> None:
    """The folder holding a state folder must not let another user rename ours away and put
    theirs in its place: owned by this user or root, and sticky (like /tmp) when others may
    write it."""
    try:
        st = os.stat(parent)
    except OSError as exc:
        raise UnsafeStateError(parent, f"cannot be read ({exc.strerror})") from None
    if st.st_uid not in (0, os.getuid()):
        raise UnsafeStateError(parent, f"belongs to uid {st.st_uid}, neither this user nor root")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UnsafeStateError(parent, "can be written by others and is not sticky")


def open_state(path: Path, *, create: bool) -> int:
    """A read-write descriptor of the state file `path` (in a folder `private_dir` passed):
    made exclusively with mode 0600 when missing and `create`, else opened; never through a
    symbolic link, and only a regular file of this user. FileNotFoundError when it is missing
    and not `create`."""
    if create:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _SAFE, 0o600)
        except FileExistsError:
            pass  # an existing file: opened and checked below
    return _open(path, os.O_RDWR)


def open_for_reading(path: Path) -> int | None:
    """A read-only descriptor of `path` when it is a regular file of this user; None for a
    symbolic link, a FIFO, a device, a socket or another user's file (a reader of a shared
    folder skips those), and for a file that vanished."""
    try:
        return _open(path, os.O_RDONLY)
    except (UnsafeStateError, FileNotFoundError):
        return None


def is_own_regular(path: Path) -> bool:
    """lstat says `path` is a regular file of this user (not a link to one)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()


def _open(path: Path, flags: int) -> int:
    try:
        fd = os.open(path, flags | _SAFE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise UnsafeStateError(path, "is a symbolic link") from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise UnsafeStateError(path, f"cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeStateError(path, "is not a regular file")
        if st.st_uid != os.getuid():
            raise UnsafeStateError(path, f"belongs to uid {st.st_uid}, not to this user")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def pid_max() -> int:
    """The largest process id this system hands out (/proc/sys/kernel/pid_max; 2**22, the
    kernel's own ceiling, where it cannot be read)."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 1 << 22


def plausible_pid(value: object) -> bool:
    """A pid read from a shared file can name an engine process: an int in 2..pid_max (1 is
    init, which is no engine; 0 and negatives address process groups in kill())."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 < value <= pid_max()
