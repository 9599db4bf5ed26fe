"""Files the engine writes for people to read (reports, snapshots, summaries): written under a
temporary name in the same folder and renamed, so an interrupted run (Ctrl-C, SIGTERM, a full
disk) never leaves half a file under the real name."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: Path | str, write: Callable[[Path], None]) -> Path:
    """`write(tmp)` to a temporary name beside `path`, then rename it into place; the
    temporary file is removed if anything fails on the way."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_text(path: Path | str, text: str) -> Path:
    """`text` as UTF-8 at `path`, whole or not at all."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
