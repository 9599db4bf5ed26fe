"""Files the engine writes for people to read (reports, snapshots, summaries): written under a
temporary name in the same folder and renamed, so an interrupted run (Ctrl-C, SIGTERM, a full
disk) never leaves half a file under the real name."""
from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import OutputWriteError


#: Errors of the disk rather than of the program: a full disk, a quota, a read-only file
#: system, an I/O error. They are the user's to fix and are said as such (OutputWriteError).
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG})


def atomic_write(path: Path | str, write: Callable[[Path], None]) -> Path:
    """`write(tmp)` to a temporary name beside `path`, then rename it into place; the
    temporary file is removed if anything fails on the way."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
            raise OutputWriteError(path, exc.strerror or str(exc)) from exc
        raise
    return path


def atomic_text(path: Path | str, text: str) -> Path:
    """`text` as UTF-8 at `path`, whole or not at all."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
