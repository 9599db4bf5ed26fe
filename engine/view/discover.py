"""Which files a `view PATH...` means: folders (recursively), glob patterns and single files.

Folders are walked in sorted order and keep files whose suffix is an image kind the engine
or Pillow reads (`IMAGE_SUFFIXES`, `TEXTURE_SUFFIXES`); a file named explicitly is kept
whatever its suffix (it is then read or reported). Hidden files and folders are skipped in
walks. Each file appears once, in the order given. Only regular files are kept: a FIFO,
device or socket (named explicitly, in a folder or by a pattern) is skipped and named, never
opened: reading a FIFO named `pipe.png` would wait forever for a writer. A symbolic link
that leads nowhere (a loop, a link to itself, a missing target) is skipped and named too,
never followed into an `OSError: Too many levels of symbolic links`, and so is a folder
that cannot be read.
"""
from __future__ import annotations

import errno
import glob
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..textures.source_image import IMAGE_SUFFIXES

#: Already GPU textures: registered with the provider as they are.
TEXTURE_SUFFIXES = (".ktx2", ".dds")


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    #: each file's resolved path, as the folder walk found it (its cache key's part)
    resolved: dict[Path, Path] = field(default_factory=dict)
    #: (what the user wrote, why nothing came of it): reported once, the rest is shown
    problems: list[tuple[str, str]] = field(default_factory=list)


def _wanted(path: Path | str) -> bool:
    return os.path.splitext(path)[1].lower() in IMAGE_SUFFIXES + TEXTURE_SUFFIXES


def special_kind(path: Path | str) -> str | None:
    """What `path` is when it exists but is no regular file or folder ("a FIFO", "a
    device", "a socket"); None otherwise. Follows symbolic links, as opening would."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _special(spec: str, kind: str) -> tuple[str, str]:
    return spec, f"{kind}, not a regular file: skipped"


def broken_link(path: Path | str) -> str | None:
    """Why the symbolic link `path` cannot be followed ("a symbolic link loop", "a dangling
    symbolic link ..."); None when it is no link or its target exists. The reason is the
    problem reported: a loop otherwise surfaces as an ELOOP OSError from whatever stats it."""
    try:
        if not os.path.islink(path):
            return None
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop (it leads back to itself): skipped"
        if exc.errno == errno.ENOENT:
            return f"a dangling symbolic link (to {os.readlink(path)!r}, missing): skipped"
        return f"a symbolic link that cannot be followed ({exc.strerror}): skipped"
    return None


def _walk(folder: Path, problems: list[tuple[str, str]] | None = None
          ) -> list[tuple[Path, Path]]:
    """(path, identity) of the wanted files below `folder`, in sorted order: the identity
    is the resolved path, resolved once for the folder and again only for symbolic links
    (a large folder is walked without a path resolution per file). Special files with a
    wanted name go to `problems`."""
    out: list[tuple[Path, Path]] = []
    base = folder.resolve()

    def visit(here: Path, real: Path) -> None:
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as exc:  # no permission, gone since listed: named, the rest walked
            if problems is not None:
                problems.append((str(here), f"a folder that cannot be read "
                                            f"({exc.strerror or exc}): skipped"))
            return
        subfolders = []
        for e in entries:  # a folder's own files first, then its subfolders, as os.walk
            if e.name.startswith("."):
                continue
            if e.is_symlink() and (why := broken_link(e.path)) is not None:
                if problems is not None:
                    problems.append((str(here / e.name), why))
                continue
            if e.is_dir():  # a link to a folder is listed, not followed
                if not e.is_symlink():
                    subfolders.append(e.name)
            elif _wanted(e.name):
                path = here / e.name
                if not e.is_file():  # a FIFO, device or socket (or a link to one)
                    kind = special_kind(path)
                    if kind is not None and problems is not None:
                        problems.append(_special(str(path), kind))
                    continue
                out.append((path, path.resolve() if e.is_symlink() else real / e.name))
        for name in subfolders:
            visit(here / name, real / name)

    visit(folder, base)
    return out


def discover(specs: list[str]) -> Discovery:
    """Expand the command line's PATH arguments into files (see the module docstring)."""
    found = Discovery()
    seen: set[Path] = set()

    def add(path: Path, key: Path | None = None) -> None:
        key = key or path.resolve()
        if key not in seen:
            seen.add(key)
            found.files.append(path)
            found.resolved[path] = key

    for spec in specs:
        path = Path(spec).expanduser()
        kind = special_kind(path)
        if kind is not None:
            found.problems.append(_special(spec, kind))
        elif (why := broken_link(path)) is not None:
            found.problems.append((spec, why))
        elif path.is_dir():
            walked = _walk(path, found.problems)
            if not walked:
                found.problems.append((spec, "a folder with no images in it"))
            for f, key in walked:
                add(f, key)
        elif path.is_file():
            add(path)
        elif glob.has_magic(spec):
            matches = sorted(glob.glob(os.path.expanduser(spec), recursive=True))
            found.problems += [(m, why) for m in matches
                               if _wanted(m) and (why := broken_link(m)) is not None]
            files = [Path(m) for m in matches if Path(m).is_file() and _wanted(Path(m))]
            found.problems += [_special(m, k) for m in matches
                               if _wanted(m) and (k := special_kind(m)) is not None]
            for d in (Path(m) for m in matches if Path(m).is_dir()):
                files += [f for f, _ in _walk(d, found.problems)]
            if not files:
                found.problems.append((spec, "the pattern matches no image"))
            for f in files:
                add(f)
        else:
            found.problems.append((spec, "no such file or folder"))
    found.problems = list(dict.fromkeys(found.problems))  # a file named twice: said once
    return found
