"""The streamer's settings as plain data, so an app, a demo or a test states them in one
place (and `dataclasses.replace` makes a variant) instead of a long constructor call."""
from __future__ import annotations

from dataclasses import dataclass, field

from .levels.state import PolicyConfig


@dataclass(frozen=True)
class StreamerSettings:
    #: "auto" (sparse where ARB_sparse_texture exists, else realloc), "sparse" or "realloc"
    backend: str = "auto"
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    ram_cache_bytes: int = 256 << 20
    io_workers: int = 2
    #: injected latency of every level read, (min, max) ms: stress mode and fault tests
    io_latency_ms: tuple[float, float] | None = None
    #: loads stop for the frame once uploads took this long (evictions always run)
    max_upload_ms: float = 4.0
    #: the most one of the staging ring's three segments grows to (0: no ring, every upload
    #: from client memory); the ring's size follows the uploads (levels/staging.py)
    staging_bytes: int = 16 << 20
    #: levels of at most this edge are the always-resident tail
    max_tail_size: int = 64
    #: added to every wanted level (the render scale's own bias, log2(1/scale), is already in
    #: the estimate: the FrameView carries the render scale)
    mip_bias: float = 0.0
    #: levels larger than this go up in bands over several frames (frame pacing). Measured on
    #: the H200 (benchmarks/*band4mib*): 4 MiB bands for 4096^2 BC7 levels cut upload
    #: throughput from 67% to 48% of a raw loop without a clear p99 gain, so by default only
    #: levels above 16 MiB (8192^2 BC7 and up) are banded.
    max_band_bytes: int = 16 << 20
    #: per texture at `register`: "auto" streams large power-of-two 2D textures (either side
    #: >= `virtual_min_size`, the format of the first such texture) virtually, as tiles in
    #: one page cache, and the rest by whole levels; "off" streams all by whole levels;
    #: "always" streams every texture that can be virtual virtually (docs/virtual_texturing.md)
    virtual: str = "auto"
    virtual_min_size: int = 1024
    #: the page cache's share of the pool: at most this many times the output's own need
    #: (output pixels x bytes per texel of the virtual format); see engine.memory.split
    virtual_screen_factor: float = 8.0
    #: tiles uploaded per frame at most (and 4x that many reads asked for)
    virtual_max_uploads: int = 32
    #: hold the streaming pool at this many bytes whatever the governor grants (at least the
    #: provider's floor, `ProviderStats.min_bytes`, which the governor never goes below
    #: either): a measurement of the texture policy alone, with the render scale held by
    #: other means (the lab's wall flights); None: the governor's allowance, every frame
    fixed_pool_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "sparse", "realloc"):
            raise ValueError(f"streamer backend must be auto, sparse or realloc, "
                             f"got {self.backend!r}")
        if self.virtual not in ("auto", "off", "always"):
            raise ValueError(f"streamer virtual must be auto, off or always, "
                             f"got {self.virtual!r}")
        if self.fixed_pool_bytes is not None and self.fixed_pool_bytes < 0:
            raise ValueError(f"fixed_pool_bytes must be >= 0, got {self.fixed_pool_bytes}")
        if self.io_workers < 0:
            raise ValueError(f"io_workers must be >= 0, got {self.io_workers}")
