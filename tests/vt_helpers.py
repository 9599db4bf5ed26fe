"""Shared pieces of the virtual-texture tests: a headless device and small BC7 files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from texture_helpers import encode

from engine.errors import ContextError
from engine.textures.ktx2_write import write_ktx2


def headless_device():
    from engine.gl.device import Device
    try:
        return Device.headless()
    except ContextError as exc:
        pytest.skip(f"no headless GL context: {exc}")


def bc7_file(directory: Path, name: str, size: int, seed: int = 0,
             supercompression: str | None = None) -> Path:
    """A size^2 BC7 chain of etcpak blocks (gradients and noise: every block mode); the
    seed makes the noise, so textures of different seeds differ."""
    path = directory / name
    if not path.exists():
        levels = int(np.log2(size)) + 1
        chain = [encode("BC7", max(1, size >> lvl), max(1, size >> lvl), seed=seed * 97 + lvl)
                 for lvl in range(levels)]
        write_ktx2(path, "BC7", size, size, chain, supercompression=supercompression)
    return path
