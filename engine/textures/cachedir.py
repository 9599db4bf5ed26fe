"""Where generated and baked textures are cached between runs: $ENGINE_CACHE, else
~/.cache/engine. One place, so demos, benches and the glTF loader share one folder a user
can find and delete."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("ENGINE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "engine"
