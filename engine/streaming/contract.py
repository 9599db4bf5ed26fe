"""The contract between the renderer and whatever keeps textures on the GPU.

The renderer never owns textures: it asks a `TextureProvider` to bind id N on unit U, and
tells it once per frame what the camera sees as a `FrameView` of plain numbers. The provider
(the static loader or the streamer) decides which mip levels each texture needs from that view
alone, so streaming policy stays a pure function of numbers, testable without a renderer.
`residency(id)` tells the renderer which chain levels are really there (the mip-debug view
colours what is missing); `stats()` is the typed summary the governor and the reports read.
This module sits in the streaming layer, below render: the renderer imports it, never the
other way round.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..memory.split import CacheNeeds

if TYPE_CHECKING:  # the GL object type only names what the device hands out
    from ..gl.types import Program

# Texture slots of a material, in the column order of `FrameView.texture_ids`.
TEXTURE_SLOTS: tuple[str, ...] = ("albedo", "normal", "roughness_metal")
NO_TEXTURE = -1


@dataclass(frozen=True)
class FrameView:
    """The camera and every instance's screen-relevant numbers for one frame.

    Arrays are per instance (row i = instance i). `texture_ids[i, s]` is the provider id in
    slot `TEXTURE_SLOTS[s]` of instance i's material, or NO_TEXTURE.
    """

    frame: int
    time: float
    camera_pos: np.ndarray  # (3,) float32, world space
    view: np.ndarray  # (4, 4) float32, row-major (numpy convention)
    proj: np.ndarray  # (4, 4) float32, row-major
    fovy: float  # vertical field of view, radians
    viewport: tuple[int, int]  # render resolution (w, h) in pixels
    render_scale: float  # render resolution / output resolution
    centers: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    radii: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    uv_density: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    texture_ids: np.ndarray = field(
        default_factory=lambda: np.zeros((0, len(TEXTURE_SLOTS)), np.int32))

    @property
    def instance_count(self) -> int:
        return int(self.centers.shape[0])


@dataclass
class ProviderStats:
    """What every texture provider reports each frame, in bytes and counts."""

    resident_bytes: int = 0  # texture memory held now
    wanted_bytes: int = 0  # what the last FrameView justified
    min_bytes: int = 0  # the floor the provider cannot go below (always-resident tails)
    pending_uploads: int = 0  # levels read but not on the GPU yet
    textures: int = 0  # registered textures
    #: virtual-texture tiles shown now but not resident (0 for whole-level providers; one per
    #: virtual texture before the first feedback readback): whole textures settle when
    #: wanted == resident, a page cache when nothing shown is missing
    missing_tiles: int = 0
    #: resident bytes by priority tier ("visible", "prefetch", "recent", "none"); empty for
    #: a provider without tiers (everything static is simply resident)
    resident_by_tier: dict[str, int] = field(default_factory=dict)
    reads_in_flight: int = 0  # reads asked for and not finished (queued or being read)
    bytes_read: int = 0  # read from files since the provider was made (rates: the monitor)
    bytes_uploaded: int = 0  # uploaded to the GPU since the provider was made
    cache_slots: int = 0  # virtual-texture page-cache slots (0: no page cache)
    cache_slots_used: int = 0  # of them, holding a tile
    #: the staging ring held now: fixed memory given back under pressure, so no floor
    staging_bytes: int = 0
    #: what a virtual-texture page cache needs of the pool (None without one): the
    #: governor's input for the cache's share of it
    cache: CacheNeeds | None = None


@dataclass(frozen=True)
class Residency:
    """What is on the GPU for one texture: its full chain size and the finest level held.

    `base_level` may be fractional while a streamer fades a new level in (it is the min LOD
    the sampler is clamped to, in chain levels)."""

    chain_width: int
    chain_height: int
    levels: int
    base_level: float


@runtime_checkable
class TextureProvider(Protocol):
    """Keeps textures on the GPU for the renderer. Every method runs on the render thread."""

    def register(self, key: str, path: Path) -> int:
        """Make `path` known under `key`; returns the id materials use. Same key, same id."""
        ...

    def register_many(self, entries: Sequence[tuple[str, str | Path]]) -> list[int]:
        """`register` of (key, path) pairs, in order; a provider may batch the work (one read
        per file, one upload per texture, all or nothing). Scene builders call this."""
        ...

    def begin_frame(self, view: FrameView) -> None:
        """Learn what this frame shows (before any bind): the streamer plans loads here."""
        ...

    def bind(self, texture_id: int, unit: int) -> None:
        """Bind the texture's resident levels for sampling on `unit`."""
        ...

    def residency(self, texture_id: int) -> Residency:
        ...

    def end_frame(self) -> None:
        ...

    def stats(self) -> ProviderStats:
        """What the provider holds and wants now (the governor and the reports read it)."""
        ...

    def release(self) -> None:
        """Release every GL object the provider made."""
        ...


@runtime_checkable
class PooledProvider(Protocol):
    """A provider that fills a byte pool granted each frame (the streamer): the frame loop
    hands it the governor's streaming allowance before `begin_frame`, and the page cache's
    share of it (`BudgetSplit.cache_allowance`; None: the provider splits it itself)."""

    def grant(self, pool_bytes: int, cache_bytes: int | None = None) -> None: ...


@runtime_checkable
class FeedbackConsumer(Protocol):
    """A provider that folds the GPU feedback pass's per-texture levels into its estimate."""

    def set_feedback(self, levels: np.ndarray) -> None: ...


@dataclass(frozen=True)
class ResidentTextures:
    """What a provider holds on the GPU, as arrays: the batched renderer reads it once per
    frame instead of one `residency` call per texture. `version` changes whenever any id's
    GL texture object changed (a reallocation), so a reader rebuilds its handles only then."""

    version: int
    textures: Sequence[Any]  # per id: the GpuTexture now sampled (None: nothing yet)
    finest: np.ndarray  # per id: finest resident chain level (float32)
    min_lod: np.ndarray  # per id: chain level the sampler is clamped to (>= finest: fade-in)


@runtime_checkable
class ResidentTexturesSource(Protocol):
    """A provider that can give all its resident textures at once."""

    def resident_textures(self) -> ResidentTextures: ...


class VirtualTextures(Protocol):
    """What the renderer needs of a virtual texture system (engine.streaming.virtual): the
    page cache, page table and LOD proxy bound for a program, and the feedback target its
    tile feedback pass draws into."""

    def bind(self, program: Program) -> None:
        """Bind the cache, table and proxy units and set `program`'s vt uniforms."""
        ...

    def feedback_reserve(self, size: tuple[int, int]) -> None:
        """Make the feedback target of exactly `size` and every readback buffer now (the
        old ones first), so the pass allocates nothing later."""
        ...

    def feedback_bytes(self) -> int:
        """Bytes of the feedback target, its depth and its readback buffers."""
        ...

    def feedback_begin(self, size: tuple[int, int]) -> bool:
        """Make the feedback target of `size` current; False while every readback of the
        ring is still in flight (the pass is skipped)."""
        ...

    def feedback_end(self, frame: int) -> None:
        """Start the readback of the pass just drawn, for `frame`."""
        ...


@runtime_checkable
class VirtualTextureHost(Protocol):
    """A provider some of whose ids are virtual textures (tiles in a page cache, sampled
    through vt_sample): the renderer asks which ids, binds the system's units and draws its
    feedback pass. `virtual_system()` is None while no id is virtual."""

    def virtual_ids(self) -> np.ndarray:
        """Per provider id: its virtual-texture id (vt_sample's argument), or -1."""
        ...

    def virtual_system(self) -> VirtualTextures | None: ...
