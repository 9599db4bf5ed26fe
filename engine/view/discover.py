"""Which files a `view PATH...` means: folders (recursively), glob patterns and single files.

Folders are walked in sorted order and keep files whose suffix is an image kind the engine
or Pillow reads (`IMAGE_SUFFIXES`, `TEXTURE_SUFFIXES`); a file named explicitly is kept
whatever its suffix (it is then read or reported). Hidden files and folders are skipped in
walks. Each file appears once, in the order given.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..textures.source_image import IMAGE_SUFFIXES

#: Already GPU textures: registered with the provider as they are.
TEXTURE_SUFFIXES = (".ktx2", ".dds")


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    #: (what the user wrote, why nothing came of it): reported once, the rest is shown
    problems: list[tuple[str, str]] = field(default_factory=list)


def _wanted(path: Path | str) -> bool:
    return os.path.splitext(path)[1].lower() in IMAGE_SUFFIXES + TEXTURE_SUFFIXES


def _walk(folder: Path) -> list[tuple[Path, Path]]:
    """(path, identity) of the wanted files below `folder`, in sorted order: the identity
    is the resolved path, resolved once for the folder and again only for symbolic links
    (a large folder is walked without a path resolution per file)."""
    out: list[tuple[Path, Path]] = []
    base = folder.resolve()

    def visit(here: Path, real: Path) -> None:
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            return
        subfolders = []
        for e in entries:  # a folder's own files first, then its subfolders, as os.walk
            if e.name.startswith("."):
                continue
            if e.is_dir():  # a link to a folder is listed, not followed
                if not e.is_symlink():
                    subfolders.append(e.name)
            elif _wanted(e.name):
                path = here / e.name
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

    for spec in specs:
        path = Path(spec).expanduser()
        if path.is_dir():
            walked = _walk(path)
            if not walked:
                found.problems.append((spec, "a folder with no images in it"))
            for f, key in walked:
                add(f, key)
        elif path.is_file():
            add(path)
        elif glob.has_magic(spec):
            matches = sorted(glob.glob(os.path.expanduser(spec), recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file() and _wanted(Path(m))]
            for d in (Path(m) for m in matches if Path(m).is_dir()):
                files += [f for f, _ in _walk(d)]
            if not files:
                found.problems.append((spec, "the pattern matches no image"))
            for f in files:
                add(f)
        else:
            found.problems.append((spec, "no such file or folder"))
    return found
