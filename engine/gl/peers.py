"""Hand-offs to peer libraries measured against the engine (benchmarks only).

moderngl-window's resource loaders work on the moderngl context it was told is current; the
peers benchmark lends it ours, so both load into the same context and the same ledger.
"""
from __future__ import annotations

from .device import Device


def lend_context_to_moderngl_window(device: Device) -> None:
    """Make `device`'s context moderngl-window's current one (its headless setting)."""
    import moderngl_window

    moderngl_window.activate_context(ctx=device._ctx)
