"""The texture providers a run can name (`RunSettings.provider`, `--provider`), explicitly.

A registry instead of import side effects: each entry is a factory `(device, settings,
clock) -> TextureProvider`, and adding one is a `register_provider` call by the code that owns
it (a benchmark's variant, a host's own provider). No prefix tricks, no lazy imports.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..gl.device import Device
from ..streaming.contract import TextureProvider
from ..streaming.inline_io import InlineLevelIO
from ..streaming.levels.streamer import Clock
from ..streaming.provider import StreamingProvider
from ..streaming.static import StaticTextureProvider
from .settings import RunSettings

ProviderFactory = Callable[[Device, RunSettings, Clock], TextureProvider]


def _streamer(**overrides) -> ProviderFactory:
    def make(device: Device, settings: RunSettings, clock: Clock) -> TextureProvider:
        cfg = replace(settings.streamer, **overrides)
        # Per texture at register: whole levels or virtual tiles (none with virtual "off").
        if settings.deterministic:
            return StreamingProvider(device, cfg, clock=clock, io=InlineLevelIO,
                                     deterministic=True)
        return StreamingProvider(device, cfg)
    return make


PROVIDERS: dict[str, ProviderFactory] = {
    "static": lambda device, settings, clock: StaticTextureProvider(device),
    "streaming": _streamer(),
    "streaming-realloc": _streamer(backend="realloc"),
    "streaming-sparse": _streamer(backend="sparse"),
    # Stress mode (`demo --stress`): every level read waits 2-40 ms, as from a busy disk.
    "streaming-stress": _streamer(io_latency_ms=(2.0, 40.0)),
}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make a provider selectable by name."""
    PROVIDERS[name] = factory


def check_provider(name: str) -> None:
    """Raise ValueError naming the known providers when `name` is not one of them."""
    if name not in PROVIDERS:
        raise ValueError(f"unknown texture provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")


def make_provider(name: str, device: Device, settings: RunSettings, clock: Clock
                  ) -> TextureProvider:
    check_provider(name)
    return PROVIDERS[name](device, settings, clock)
