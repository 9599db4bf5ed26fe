"""What a run is asked to do, as plain data: the composition root's only input.

`RunSettings` replaces the long parameter lists the frame loop and the window loop used to
take; a variant is `dataclasses.replace(settings, frames=10)` (or keyword overrides to
`run_scene`). Values are checked here, once, before anything is made.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import inputs
from ..gl.device import Device
from ..memory.budget import DEFAULT_BUDGET, Budget, BudgetSpec
from ..memory.governor import GovernorSettings
from ..memory.shares import ShareSettings, ViewShares
from ..resolution.policy import ResolutionSettings
from ..streaming.contract import TextureProvider
from ..streaming.levels.streamer import Clock
from ..streaming.settings import StreamerSettings

VIEW_MODES = ("lit", "mip")


@dataclass(frozen=True)
class RunSettings:
    frames: int = 120  # headless: frames to render; window: <= 0 runs until closed
    #: output size, (width, height) or "WIDTHxHEIGHT"; a window's framebuffer overrides it
    size: tuple[int, int] | str = (1280, 720)
    #: bytes, "512MiB" or "80%" of the device's memory (parsed here into a BudgetSpec), or a
    #: Budget made by the caller; resolved against the device by Budget.on_device
    budget: str | int | BudgetSpec | Budget = DEFAULT_BUDGET
    headless: bool = True
    screenshot: Path | str | None = None
    report: Path | str | None = None
    #: a name in engine.app.providers.PROVIDERS; "streaming" keeps textures within the budget
    #: (whole levels or virtual tiles), "static" makes every texture resident in full; or a
    #: `ProviderFactory` of the caller's own (the lab's variants), used as it is
    provider: str | ProviderFactory = "streaming"
    scale: float = 1.0  # initial render scale
    upscale: str = "bilinear"  # a name in engine.resolution.upscale.MODES
    view_mode: str = "lit"
    hud: bool = False
    react: bool = True  # governor + resolution controller each frame
    dt: float = 1.0 / 60.0  # simulated time per frame: frame N always shows the same picture
    feedback: bool = False  # GPU feedback pass for the streamer (headless runs)
    #: frame clock and inline reads: the streamer's results depend on the frame number only
    deterministic: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)  # the scene factory's options
    streamer: StreamerSettings = field(default_factory=StreamerSettings)
    governor: GovernorSettings = field(default_factory=GovernorSettings)
    resolution: ResolutionSettings = field(default_factory=ResolutionSettings)
    #: the report's metadata block (engine.diagnostics.report.collect_metadata: command,
    #: scene, options, ...); the run adds the renderer and GL version. None: no block.
    metadata: Mapping[str, Any] | None = None
    #: per-frame records kept in memory (and in the report): the newest `keep_frames`, or
    #: all when None. A long run (a soak of 100,000 frames) keeps a bounded window.
    keep_frames: int | None = None
    #: a shared budget: a group name on this machine (processes), a `ViewShares` (the views
    #: of this process), or a `ShareSettings` with the weight and floor; None: not shared
    share: str | ShareSettings | ViewShares | None = None
    #: a Chrome trace-event JSON of the run is written here (engine.diagnostics.trace)
    trace: Path | str | None = None
    #: headless: up to this many frames more after `frames` while the last frame's record
    #: does not say `settled` (a scene's hook says when nothing more changes its picture),
    #: so a screenshot shows the complete picture; 0: exactly `frames`
    settle_frames: int = 0
    #: a window's title until the scene's controls (if any) name what is under view
    title: str = "engine demo"

    def __post_init__(self) -> None:
        # The CLI's checks (engine.inputs), with the field's name: the API refuses what the
        # command line refuses, with the same words.
        object.__setattr__(self, "size", inputs.checked(
            "size", lambda v: inputs.output_size(v, max_edge=None), self.size))
        window_until_closed = (not self.headless and isinstance(self.frames, int)
                               and not isinstance(self.frames, bool) and self.frames <= 0)
        if not window_until_closed:
            object.__setattr__(self, "frames", inputs.checked("frames", inputs.positive_int,
                                                      self.frames))
        object.__setattr__(self, "budget", inputs.checked("budget", inputs.budget,
                                                          self.budget))
        if not 0 < self.scale <= 1:
            raise ValueError(f"scale must be in (0, 1], got {self.scale}")
        if self.view_mode not in VIEW_MODES:
            raise ValueError(f"view_mode must be one of {VIEW_MODES}, got {self.view_mode!r}")
        if self.keep_frames is not None and self.keep_frames < 1:
            raise ValueError(f"keep_frames must be >= 1 or None, got {self.keep_frames}")
        if not self.dt > 0:
            raise ValueError(f"dt must be positive, got {self.dt}")
        if self.settle_frames < 0:
            raise ValueError(f"settle_frames must be >= 0, got {self.settle_frames}")
        if self.share is not None:
            object.__setattr__(self, "share", ShareSettings.of(self.share))


#: Makes a run's texture provider: (device, settings, clock) -> provider.
ProviderFactory = Callable[[Device, RunSettings, Clock], TextureProvider]
