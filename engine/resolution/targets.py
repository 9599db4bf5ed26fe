"""The render-target set executor: allocates what a `TargetsSpec` describes, and resizes it.

The resolution controller (`policy.py`) scales to fit *memory*, so a change of scale here is a
real reallocation, not a viewport trick: the old targets are deleted and the ledger drops. While
the new set is being made, old and new exist together (the ledger's per-frame peak shows it);
`release_first` trades a frame of garbage for never holding both.

Every target is sized with `TargetSpec.dims`, the same function `TargetsSpec.bytes_at` uses, so
what the controller predicted for a scale is what the ledger records, to the byte.

Target roles, by name in the spec:
  color    (required) what the scene renders into; multisampled -> a renderbuffer
  depth    (optional) depth attachment of the scene framebuffer
  resolve  (required when color is multisampled) single-sample texture the MSAA colour is
           resolved into, and what the presentation pass samples
  any other name: allocated (and counted) too, reachable through `targets[name]`.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import FaultKind, GLOutOfMemoryError
from ..formats import get as get_format
from ..memory.ledger import Category
from ..gl.device import Device, mgl_format
from ..gl.types import Framebuffer, Renderbuffer, Texture
from .policy import ResolutionSettings
from .targets_spec import TargetSpec, TargetsSpec

log = logging.getLogger(__name__)

#: The one depth format the Device factories make (and ledger): GL_DEPTH_COMPONENT24.
DEPTH_FORMAT = "DEPTH24"


def default_targets_spec(msaa: int = 1) -> TargetsSpec:
    """HDR colour (RGBA16F) + depth at render resolution; with `msaa` > 1 both are
    multisampled renderbuffers and a single-sample RGBA16F `resolve` texture is added."""
    if msaa < 1:
        raise ValueError(f"msaa must be >= 1, got {msaa}")
    targets = [TargetSpec("color", "RGBA16F", msaa), TargetSpec("depth", DEPTH_FORMAT, msaa)]
    if msaa > 1:
        targets.append(TargetSpec("resolve", "RGBA16F", 1))
    return TargetsSpec(tuple(targets))


@dataclass(frozen=True)
class ResizeEvent:
    """What one reallocation did, for the controller and the frame stats.

    new_scale / new_bytes are what the set holds *afterwards*; on failure that is the old
    scale (default order) or a smaller fallback (release_first), never nothing.
    requested_scale is what was asked for: the controller answers a failure with
    `on_alloc_failed(requested_scale)`. peak_bytes is the most bytes this set held at once
    during the change (old + new by default, about max(old, new) with release_first).
    """

    old_scale: float
    new_scale: float
    requested_scale: float
    old_bytes: int
    new_bytes: int
    peak_bytes: int
    release_first: bool
    failed: bool = False
    error: str | None = None
    output_size: tuple[int, int] = (0, 0)


@dataclass
class _Meter:
    """Bytes this set holds right now, and the most it held since the meter was made."""

    held: int
    peak: int = 0

    def __post_init__(self) -> None:
        self.peak = self.held

    def add(self, nbytes: int) -> None:
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def sub(self, nbytes: int) -> None:
        self.held -= nbytes


@dataclass
class _Allocated:
    """One generation of GL objects: the targets at one (output size, scale)."""

    output_size: tuple[int, int]
    scale: float
    targets: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # name -> ledgered bytes
    framebuffers: list[Framebuffer] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes.values())


class RenderTargetSet:
    """The scene's render targets at `scale` of `output_size`, made through the device."""

    def __init__(self, device: Device, spec: TargetsSpec, output_size: tuple[int, int],
                 scale: float = 1.0, label: str = "targets",
                 ladder: Sequence[float] | None = None) -> None:
        self._device = device
        #: The scales a failed allocation may fall back to: the resolution controller's grid
        #: (the frame loop sets the controller's own), so the set never lands on a scale the
        #: controller would not choose.
        self.ladder: tuple[float, ...] = tuple(sorted(ladder)) if ladder is not None \
            else ResolutionSettings().grid()
        self._spec = spec
        self._label = label
        self._by_name = {t.name: t for t in spec.targets}
        self._validate()
        self._live: _Allocated | None = self._allocate(_check_size(output_size),
                                                       _check_scale(scale), _Meter(0))

    # -- queries -------------------------------------------------------------------------------
    @property
    def spec(self) -> TargetsSpec:
        return self._spec

    @property
    def msaa(self) -> int:
        return self._by_name["color"].samples

    @property
    def fbo(self) -> Framebuffer:
        """The framebuffer the scene renders into (multisampled when msaa > 1)."""
        return self._current().framebuffers[0]

    @property
    def color(self) -> Texture:
        """The texture to present: the colour target, or its resolve target under MSAA
        (call `resolve()` after drawing)."""
        return self._current().targets["resolve" if self.msaa > 1 else "color"]

    @property
    def depth(self) -> Texture | Renderbuffer | None:
        return self._current().targets.get("depth")

    @property
    def targets(self) -> Mapping[str, Any]:
        """Every allocated target by spec name (textures, or renderbuffers when multisampled)."""
        return dict(self._current().targets)

    @property
    def scale(self) -> float:
        return self._current().scale

    @property
    def output_size(self) -> tuple[int, int]:
        return self._current().output_size

    @property
    def render_size(self) -> tuple[int, int]:
        live = self._current()
        return self._spec.render_size(*live.output_size, live.scale)

    @property
    def nbytes(self) -> int:
        """Bytes of every live target, as ledgered (== spec.bytes_at(output, scale))."""
        return self._live.nbytes if self._live is not None else 0

    # -- per frame -----------------------------------------------------------------------------
    def resolve(self) -> None:
        """Resolve the multisampled colour into `color`; nothing to do without MSAA."""
        live = self._current()
        if len(live.framebuffers) > 1:
            self._device.copy_framebuffer(live.framebuffers[1], live.framebuffers[0])

    # -- reallocation ----------------------------------------------------------------------------
    def resize(self, scale: float, release_first: bool = False) -> ResizeEvent:
        """Reallocate every scaled target for `scale` (see the module docstring for order).

        GL_OUT_OF_MEMORY does not raise: the event comes back with `failed` set and the set
        still valid, at the old scale (default order) or a fallback below the request
        (release_first); answer it with `ResolutionController.on_alloc_failed`. Only a
        release-first failure whose every fallback fails too re-raises, leaving the set empty.
        """
        return self._rebuild(self._current().output_size, _check_scale(scale), release_first)

    def set_output_size(self, width: int, height: int,
                        release_first: bool = False) -> ResizeEvent:
        """The window changed size: reallocate at the current scale for the new output."""
        return self._rebuild(_check_size((width, height)), self._current().scale, release_first)

    def release(self) -> None:
        """Delete every GL object of the set; the set is unusable afterwards."""
        if self._live is not None:
            self._release(self._live, _Meter(self._live.nbytes))
            self._live = None

    # -- internals -------------------------------------------------------------------------------
    def _current(self) -> _Allocated:
        if self._live is None:
            raise RuntimeError(f"render-target set '{self._label}' holds no targets "
                               f"(released, or a fallback allocation failed)")
        return self._live

    def _validate(self) -> None:
        """Refuse, before allocating anything, formats the Device factories cannot make with
        the byte size the spec predicts: a mismatch would make the ledger lie."""
        if "color" not in self._by_name:
            raise ValueError("a render-target spec needs a target named 'color'")
        max_samples = self._device.max_samples
        for t in self._spec.targets:
            fmt = get_format(t.format)
            if fmt.is_depth:
                ok = t.format == DEPTH_FORMAT
            else:
                ok = fmt.mgl_dtype is not None and mgl_format(fmt.components, fmt.mgl_dtype) == fmt
            if not ok:
                raise ValueError(f"target {t.name!r}: format {t.format} cannot be made through "
                                 f"the device (colour: a plain moderngl format; depth: "
                                 f"{DEPTH_FORMAT})")
            if t.samples > max(1, max_samples):
                raise ValueError(f"target {t.name!r}: {t.samples} samples, the driver allows "
                                 f"{max_samples}")
        if self.msaa > 1:
            resolve = self._by_name.get("resolve")
            if resolve is None or resolve.samples != 1:
                raise ValueError("a multisampled 'color' needs a single-sample 'resolve' target")
        depth = self._by_name.get("depth")
        if depth is not None and depth.samples != self.msaa:
            raise ValueError("'depth' must have as many samples as 'color' (same framebuffer)")

    def _make(self, t: TargetSpec, size: tuple[int, int]) -> Any:
        dev, label = self._device, f"{self._label}.{t.name}"
        fmt = get_format(t.format)
        if fmt.is_depth:
            if t.samples > 1:
                return dev.renderbuffer(size, samples=t.samples, depth=True, category=Category.TARGET,
                                        label=label)
            return dev.depth_texture(size, category=Category.TARGET, label=label)
        if t.samples > 1:
            return dev.renderbuffer(size, fmt.components, samples=t.samples, dtype=fmt.mgl_dtype,
                                    category=Category.TARGET, label=label)
        return dev.texture(size, fmt.components, dtype=fmt.mgl_dtype, category=Category.TARGET,
                           label=label)

    def _allocate(self, output_size: tuple[int, int], scale: float, meter: _Meter) -> _Allocated:
        """Make every target and the framebuffers; on any error release what was made and
        re-raise, so a failed allocation leaves nothing behind."""
        new = _Allocated(output_size, scale)
        try:
            for t in self._spec.targets:
                size = t.dims(*output_size, scale)
                new.targets[t.name] = self._make(t, size)
                new.sizes[t.name] = t.bytes(*output_size, scale)
                meter.add(new.sizes[t.name])
            new.framebuffers.append(self._device.framebuffer(
                [new.targets["color"]], new.targets.get("depth"), label=f"{self._label}.fbo"))
            if self.msaa > 1:
                new.framebuffers.append(self._device.framebuffer(
                    [new.targets["resolve"]], label=f"{self._label}.resolve_fbo"))
        except Exception:
            self._release(new, meter)
            raise
        return new

    def _release(self, gen: _Allocated, meter: _Meter) -> None:
        for fbo in reversed(gen.framebuffers):
            self._device.release(fbo)
        for name in reversed(list(gen.targets)):
            self._device.release(gen.targets[name])
            meter.sub(gen.sizes.get(name, 0))
        gen.framebuffers.clear()
        gen.targets.clear()
        gen.sizes.clear()

    def _dims(self, output_size: tuple[int, int], scale: float) -> tuple[tuple[int, int], ...]:
        return tuple(t.dims(*output_size, scale) for t in self._spec.targets)

    def _rebuild(self, output_size: tuple[int, int], scale: float,
                 release_first: bool) -> ResizeEvent:
        old = self._current()
        old_scale, old_bytes = old.scale, old.nbytes
        meter = _Meter(old_bytes)

        def event(**kw: Any) -> ResizeEvent:
            live = self._current()
            return ResizeEvent(old_scale=old_scale, new_scale=live.scale,
                               requested_scale=scale, old_bytes=old_bytes,
                               new_bytes=live.nbytes, peak_bytes=meter.peak,
                               release_first=release_first, output_size=live.output_size, **kw)

        if output_size == old.output_size and \
                self._dims(output_size, scale) == self._dims(old.output_size, old.scale):
            old.scale = scale  # same pixels: reallocating would only churn
            return event()
        if release_first:
            self._release(old, meter)
            self._live = None
        try:
            new = self._allocate(output_size, scale, meter)
        except GLOutOfMemoryError as exc:
            log.warning("'%s': targets at scale %g for %dx%d failed (%s)", self._label, scale,
                        *output_size, exc)
            self._device.faults.report(FaultKind.TARGET_ALLOC, self._label, exc)
            if release_first:
                self._live = self._fallback(output_size, scale, old_scale, old.output_size,
                                            meter, exc)
            return event(failed=True, error=str(exc))
        if not release_first:
            self._release(old, meter)
        self._live = new
        log.info("'%s': scale %g -> %g, %d -> %d bytes (peak %d%s)", self._label, old_scale,
                 scale, old_bytes, new.nbytes, meter.peak,
                 ", released first" if release_first else "")
        return event()

    def _fallback(self, output_size: tuple[int, int], failed_scale: float, old_scale: float,
                  old_output: tuple[int, int], meter: _Meter,
                  cause: GLOutOfMemoryError) -> _Allocated:
        """After a release-first failure the old set is gone: re-make the set smaller so it
        stays usable. The old scale comes first when it is smaller (it fit a moment ago),
        then each smaller scale of the ladder, descending. Raises `cause` only if even the
        smallest fails."""
        candidates: list[float] = []
        if output_size == old_output and old_scale < failed_scale:
            candidates.append(old_scale)
        below = candidates[0] if candidates else failed_scale
        candidates += [s for s in reversed(self.ladder) if s < below - 1e-9]
        for s in candidates:
            try:
                live = self._allocate(output_size, s, meter)
            except GLOutOfMemoryError:
                continue
            log.warning("'%s': fell back to scale %g", self._label, s)
            self._device.faults.report(FaultKind.TARGET_FALLBACK, self._label, s)
            return live
        raise cause


def _check_scale(scale: float) -> float:
    if not 0 < scale <= 1:
        raise ValueError(f"render scale must be in (0, 1], got {scale}")
    return float(scale)


def _check_size(size: tuple[int, int]) -> tuple[int, int]:
    w, h = int(size[0]), int(size[1])
    if w < 1 or h < 1:
        raise ValueError(f"output size must be positive, got {w}x{h}")
    return w, h
