"""The render-target set as plain data, and its exact byte cost at any render scale.

The resolution controller fits the render scale to a byte allowance, so it must know what a
scale costs *before* allocating anything. That cost is computed here from the same formulas the
ledger uses (`engine.memory.sizes.renderbuffer_bytes`), and the executor that really allocates
the targets must size them with `TargetSpec.dims` so that the prediction and the ledger agree to
the byte. A prediction that is off by even one row would let a "fitting" scale overrun the budget.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..formats import get as get_format
from ..memory.sizes import renderbuffer_bytes


@dataclass(frozen=True)
class TargetSpec:
    """One render target.

    `relative_size` is relative to the render resolution (1.0 = full render size, 0.5 = a
    half-resolution buffer such as a bloom chain level). Targets with `follows_scale=False`
    are sized relative to the *output* resolution instead (the upscaler's destination, a UI
    layer): they cost the same at every scale, and listing them here keeps the byte curve the
    governor sees honest about that constant part.

    `min_width`: a pass that must see every object (a feedback pass) is never narrower than
    this, nor wider than the render size; the height keeps the render aspect. `copies`:
    how many buffers of this size it keeps (a readback ring's), priced as one entry.
    """

    name: str
    format: str
    samples: int = 1
    relative_size: float = 1.0
    follows_scale: bool = True
    min_width: int = 0
    copies: int = 1

    def __post_init__(self) -> None:
        get_format(self.format)  # raises KeyError naming the known formats
        if self.samples < 1:
            raise ValueError(f"target {self.name!r}: samples must be >= 1, got {self.samples}")
        if not self.relative_size > 0:
            raise ValueError(f"target {self.name!r}: relative_size must be > 0, "
                             f"got {self.relative_size}")
        if self.min_width < 0 or self.copies < 1 or (self.min_width and not self.follows_scale):
            raise ValueError(f"target {self.name!r}: min_width must be >= 0 (on a target "
                             f"that follows the scale) and copies >= 1")

    def dims(self, width: int, height: int, scale: float) -> tuple[int, int]:
        """Pixel size of this target for an output of width x height at render `scale`.

        `round` (Python's, half-to-even) is the one rounding rule; the executor must call this
        rather than re-deriving sizes, or ledger and prediction drift apart.
        """
        if self.min_width:
            rw, rh = max(1, round(width * scale)), max(1, round(height * scale))
            k = min(1.0, max(self.relative_size, self.min_width / rw))
            return max(1, round(rw * k)), max(1, round(rh * k))
        factor = self.relative_size * (scale if self.follows_scale else 1.0)
        return max(1, round(width * factor)), max(1, round(height * factor))

    def bytes(self, width: int, height: int, scale: float) -> int:
        """Exact bytes of this target at `scale` (all samples, all copies)."""
        w, h = self.dims(width, height, scale)
        return renderbuffer_bytes(self.format, w, h, self.samples) * self.copies


@dataclass(frozen=True)
class TargetsSpec:
    """The whole render-target set; `bytes_at` is what a scale costs, exactly."""

    targets: tuple[TargetSpec, ...]

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError("a targets spec needs at least one target")
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate target names in {names}")

    def render_size(self, width: int, height: int, scale: float) -> tuple[int, int]:
        """The render resolution (what a relative_size=1.0 scaled target has)."""
        return max(1, round(width * scale)), max(1, round(height * scale))

    def bytes_at(self, width: int, height: int, scale: float) -> int:
        """Sum of every target's exact bytes for an output of width x height at `scale`."""
        if width < 1 or height < 1:
            raise ValueError(f"output size must be positive, got {width}x{height}")
        if not scale > 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        return sum(t.bytes(width, height, scale) for t in self.targets)

    @classmethod
    def forward_hdr(cls, samples: int = 1) -> TargetsSpec:
        """The default forward renderer's set: HDR colour + depth at render resolution, and the
        upscaler's sRGB output at output resolution."""
        return cls((
            TargetSpec("color", "RGBA16F", samples),
            TargetSpec("depth", "DEPTH24_STENCIL8", samples),
            TargetSpec("output", "RGBA8_SRGB", 1, 1.0, follows_scale=False),
        ))
