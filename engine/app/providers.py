"""The texture providers a run can name (`RunSettings.provider`, `--provider`), explicitly.

A registry instead of import side effects: each entry is a factory `(device, settings,
clock) -> TextureProvider`, and adding one is a `register_provider` call by the code that owns
it (a host's own provider). A run may also be given a factory itself instead of a name (the
lab's fixed-pool variants), which nothing registers. No prefix tricks, no lazy imports.
"""
from __future__ import annotations

from dataclasses import replace

from ..gl.device import Device
from ..streaming.contract import TextureProvider
from ..streaming.inline_io import InlineLevelIO
from ..streaming.levels.streamer import Clock
from ..streaming.provider import StreamingProvider
from ..streaming.static import StaticTextureProvider
from .settings import ProviderFactory, RunSettings


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


def provider_name(provider: str | ProviderFactory) -> str:
    """What a run's summary calls its provider: the name, or the factory's own name."""
    return provider if isinstance(provider, str) else getattr(provider, "__name__", "custom")


def check_provider(name: str | ProviderFactory) -> None:
    """Raise ValueError naming the known providers when `name` is neither one of them nor a
    factory."""
    if callable(name):
        return
    if name not in PROVIDERS:
        raise ValueError(f"unknown texture provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")


def make_provider(name: str | ProviderFactory, device: Device, settings: RunSettings,
                  clock: Clock) -> TextureProvider:
    check_provider(name)
    factory = name if callable(name) else PROVIDERS[name]
    return factory(device, settings, clock)
