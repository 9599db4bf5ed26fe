"""The engine's frame loop as a host sees it: "render a frame at this size", "give me the
picture", "release everything".

Why a wrapper: a host decides the size (its widget, canvas or notebook cell is resized by the
user) and the moment (its paint or draw callback), where the engine's runner is built for a
fixed-size loop it drives itself. It drives engine.app's FrameLoop.embedded (the governor and
its budget come with it: pass budget= like any RunSettings field, and on_over_budget= to be
told when a frame goes over it). Textures stream within the budget unless provider= says
otherwise.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..app.loop import FrameLoop
from ..gl.device import Device

log = logging.getLogger(__name__)

SceneFactory = Callable[..., Any]  # (device, provider, options) -> Scene


class HostFrames:
    """One scene's frame loop on a device, at a size the host sets each frame.

    Frame N is the runner's frame N (time advances by a fixed step), so what a host shows
    equals a headless run of the same scene at the same size: embedding tests rely on it."""

    def __init__(self, device: Device, scene_factory: SceneFactory, size: tuple[int, int], *,
                 options: Mapping[str, Any] | None = None, **loop_kw: Any) -> None:
        self.device = device
        self.frame = 0
        self.loop = FrameLoop.embedded(device, scene_factory, size=_valid(size),
                                       options=dict(options or {}), **loop_kw)

    @property
    def size(self) -> tuple[int, int]:
        return tuple(self.loop.renderer.output_size)  # type: ignore[return-value]

    @property
    def output_fbo(self) -> Any:
        """The output framebuffer (engine.gl objects; hand it to engine.gl.hosts.present_to)."""
        return self.loop.renderer.output_fbo

    def render(self, size: tuple[int, int] | None = None) -> dict[str, Any]:
        """Render the next frame, first following the host's new size if it changed.
        Returns the runner's record of the frame (bytes, scale, timing)."""
        if size is not None and _valid(size) != self.size:
            log.info("host resized the output to %dx%d", *_valid(size))
            with self.loop.attributed():  # the new targets are this view's
                self.loop.renderer.set_output_size(_valid(size))
        record = self.loop.step(self.frame)
        self.frame += 1
        return record

    #: Frames a hidden view draws (unshown) to give its memory back: the streamer evicts
    #: within its per-frame caps, so a large pool may take more than one.
    TRIM_FRAMES = 8

    def set_visible(self, visible: bool) -> None:
        """Tell the view's share board whether the host shows it (engine.memory.shares): a
        hidden view drops to its floor. Its memory goes back only when it draws, so hiding
        draws up to `TRIM_FRAMES` frames nobody sees, until it holds no more than its grant.
        The host makes the view's context current first. No board: nothing to do."""
        share = self.loop.governor.share
        if share is None or share.visible == visible:
            return
        share.visible = visible
        if visible:
            return
        for _ in range(self.TRIM_FRAMES):
            self.render()
            with self.loop.attributed():  # this view's bytes, not the whole device's
                if self.device.ledger.total <= share.grant:
                    break

    def image(self) -> np.ndarray:
        """The last frame as (H, W, 4) RGBA uint8, top row first, opaque (what a bitmap
        canvas or a notebook shows)."""
        with self.loop.attributed():  # a read-back buffer is the view's
            rgba = self.loop.renderer.read_output(components=4)
        rgba[..., 3] = 255
        return rgba

    def release(self) -> None:
        self.loop.release()


def frames_for(scene_factory: Any) -> Callable[..., Any]:
    """What a host drives `scene_factory` with: HostFrames, or the factory's own
    `host_frames` (of the same shape) for a view that is not a scene
    (engine.hosts.science.ScienceScene)."""
    return getattr(scene_factory, "host_frames", HostFrames)


def _valid(size: tuple[int, int]) -> tuple[int, int]:
    return max(1, int(size[0])), max(1, int(size[1]))
