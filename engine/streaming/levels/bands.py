"""Loads too big for one frame, uploaded in bands of block rows over several frames.

A level larger than a frame's band budget would stall the frame that uploads it; in bands
it arrives over a few frames instead, sampled only once complete. This is the GL side of a
load (through the backends and the uploader); which loads run is the planner's.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...gl.textures import GpuTexture
from ...memory.sizes import level_bytes
from .backends import Streamed, Uploader
from .ops import MipOp
from .registry import Registry

@dataclass(eq=False)
class _Partial:
    """A load whose level is too big for one frame, uploaded in bands of block rows over
    several frames. Its new storage (or committed pages) is ledgered from the start and
    handed to the policy as in-flight bytes; it is sampled only once complete."""

    op: MipOp
    target: GpuTexture
    data: bytes
    width: int
    height: int
    next_row: int = 0

    @property
    def done(self) -> bool:
        return self.next_row >= self.height


class BandedLoads:
    """The unfinished banded loads by texture id. An aborted load gives its bytes back to
    `ready` (the read levels by (texture, level)), usable for a later try."""

    def __init__(self, registry: Registry, uploader: Uploader, max_band_bytes: int,
                 ready: dict[tuple[int, int], bytes]) -> None:
        self.registry = registry
        self.uploader = uploader
        self.max_band_bytes = max_band_bytes
        self.ready = ready
        self.partials: dict[int, _Partial] = {}

    def banded(self, item: Streamed, level: int) -> bool:
        tf = item.tf
        return tf.layers == 1 and tf.faces == 1 and tf.levels[level].nbytes > self.max_band_bytes

    def in_flight(self) -> int:
        """Bytes the partial loads hold beyond what the policy's state counts as resident."""
        reg = self.registry
        return sum(p.op.new_bytes if reg.backend_for(reg.items[p.op.texture]).realloc
                   else max(0, p.op.delta) for p in self.partials.values())

    def start(self, op: MipOp, item: Streamed, data: bytes) -> bool:
        """Begin a banded load and upload its first band; True if it finished at once."""
        lv = item.tf.levels[op.new_base]
        target = self.registry.backend_for(item).begin_load(item, op.new_base)
        p = _Partial(op, target, data, lv.width, lv.height)
        self.partials[op.texture] = p
        self._upload_band(p, self.max_band_bytes)
        if p.done:
            self._finish(op.texture)
        return p.done

    def _upload_band(self, p: _Partial, budget: int) -> int:
        """Upload the next rows of `p` (whole block rows, about `budget` bytes)."""
        fmt = self.registry.items[p.op.texture].tf.pixel_format
        band = level_bytes(fmt, p.width, fmt.block_h)  # one row of blocks
        y0 = p.next_row
        y1 = min(p.height, y0 + max(1, budget // band) * fmt.block_h)
        start = (y0 // fmt.block_h) * band
        end = start + level_bytes(fmt, p.width, y1 - y0)
        try:
            self.uploader.rows(p.target, p.op.new_base, memoryview(p.data)[start:end], y0, y1)
        except Exception:
            self.abort(p.op.texture)
            raise
        p.next_row = y1
        return end - start

    def advance(self, failed: Callable[[int, Exception], None]) -> list[MipOp]:
        """Continue unfinished loads within this frame's band budget; the completed ops.
        A GL error aborts that load (what is resident stays) and goes to `failed`."""
        budget, finished = self.max_band_bytes, []
        for t, p in list(self.partials.items()):
            if budget <= 0:
                break
            try:
                budget -= self._upload_band(p, budget)
            except Exception as exc:
                failed(t, exc)
                continue
            if p.done:
                finished.append(self._finish(t))
        return finished

    def _finish(self, t: int) -> MipOp:
        p = self.partials.pop(t)
        item = self.registry.items[t]
        self.registry.backend_for(item).finish_load(item, p.op.new_base, p.target)
        return p.op

    def abort(self, t: int) -> None:
        p = self.partials.pop(t, None)
        if p is None:
            return
        item = self.registry.items[t]
        self.registry.backend_for(item).abort_load(item, p.op.new_base, p.target)
        self.ready[(t, p.op.new_base)] = p.data  # the bytes stay usable for a later try

    def abort_all(self) -> None:
        for t in list(self.partials):
            self.abort(t)
