"""Hand-offs to peer libraries measured against the engine (benchmarks only).

moderngl-window's resource loaders work on the moderngl context it was told is current; the
peers benchmark lends it ours, so both load into the same context and the same ledger.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .device import Device


def moderngl_window_loader(device: Device) -> tuple[str, Callable[[Path], Any]]:
    """moderngl-window's version and its PNG texture loader (mipmapped) on `device`'s context,
    made moderngl-window's current one (its headless setting). Raises ImportError without
    the library."""
    import moderngl_window
    from moderngl_window import resources
    from moderngl_window.meta import TextureDescription

    moderngl_window.activate_context(ctx=device._ctx)

    def load(png: Path) -> Any:
        return resources.textures.load(TextureDescription(path=str(png), mipmap=True))
    return moderngl_window.__version__, load
