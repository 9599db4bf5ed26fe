"""Cache files that survive a crash, a kill and a power loss: written whole or not at all.

Why. Every cache file was written to a temporary name and renamed, so a reader never saw
half a file, but nothing was flushed before the rename: after a power loss the new name can
point at a file whose blocks never reached the disk (zeros, or cut short), exactly the
files a later run then failed on. And a writer killed (or out of space) between the create
and the rename left its temporary file behind forever. Here, as SQLite commits: the data is
fsynced before the rename and the folder after it; a failed write removes its temporary
file; and `sweep_temps` removes the temporary files of writers that are gone, named by the
patterns this package writes (`NAME.tmpPID`, `.NAME.PID.tmp`). A folder that stops taking
files mid-run (full, read-only, over quota) is `refused`: its caches stop writing, say so
once (`warn_uncached`) and the run goes on without them.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .worker_life import pid_alive

log = logging.getLogger(__name__)

#: Temporary names the engine's writers use, each with the writer's pid.
_TEMP = re.compile(r"(?:.+\.tmp(?P<a>[0-9]{1,10})|\..+\.(?P<b>[0-9]{1,10})\.tmp)")


#: What a write says when its folder stopped taking files: full, read-only, no permission,
#: over quota (another file would fail the same way; a bad source would not).
_NO_ROOM = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT})


def refused(exc: BaseException) -> bool:
    """Whether `exc` is a write refused by its folder (`_NO_ROOM`), not by its data."""
    return isinstance(exc, OSError) and exc.errno in _NO_ROOM


def warn_uncached(folder: Path | str, exc: BaseException, what: str) -> None:
    """The one warning of a cache folder that stopped taking files mid-run."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    log.warning("the cache folder %s ($ENGINE_CACHE) stopped taking files (%s): the run "
                "continues without caching %s", folder, reason, what)


def temp_path(path: Path) -> Path:
    """The temporary name `write_atomic` writes `path` under (this process's own)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def commit(tmp: Path | str, path: Path | str, fd: int | None = None) -> None:
    """Make the finished temporary file `tmp` the file `path`: flushed to the disk first
    (`fd`, when the caller still holds it open, else opened here), then renamed, then the
    rename itself flushed (the folder; best effort: not every file system allows it)."""
    if fd is None:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    else:
        os.fsync(fd)
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the data itself is flushed
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Write `path` whole or not at all: `data` (bytes, or a function writing to the open
    file) to a temporary name, flushed, renamed; on any failure the temporary file is
    removed and the error raised."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as fh:
            if isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                data(fh)
            fh.flush()
            commit(tmp, path, fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sweep_temps(folder: Path) -> int:
    """Remove the temporary files in `folder` (not below it) that the engine's writers left
    when they were killed: regular files named by a writer's pattern whose writer is gone.
    A live writer's file (its pid is alive) is kept. Returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        match = _TEMP.fullmatch(name)
        if match is None:
            continue
        pid = int(match["a"] or match["b"])
        if pid == os.getpid() or pid_alive(pid):
            continue
        path = folder / name
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            path.unlink()
            removed += 1
        except OSError:
            continue
    if removed:
        log.info("%s: removed %d temporary file(s) of killed writers", folder, removed)
    return removed
