"""Where generated and baked textures are cached between runs: $ENGINE_CACHE, else
~/.cache/engine. One place, so demos, benches and the glTF loader share one folder a user
can find and delete."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("ENGINE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "engine"


def numbered_files(directory: Path, pattern: str, count: int) -> tuple[list[Path], list[int]]:
    """Paths of `count` numbered files in `directory` (`pattern.format(i)`), the folder made
    if missing, and the numbers whose file is not there yet: what a generator must make."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / pattern.format(i) for i in range(count)]
    return paths, [i for i, p in enumerate(paths) if not p.is_file()]
