"""How large the streamer's staging ring is: a pure rule of the frame's uploads and the
pool's room (the ring itself is engine.gl.staging's; `Uploader.resize` applies the rule).

Why elastic: a fixed ring was 12 MiB in every process, most of a small budget's memory,
even where nothing streams by whole levels. The ring is fixed memory in the governor's
split (category `staging`), so every byte of it is a byte the pool cannot have. It
therefore starts absent (uploads go from client memory, which works at any budget),
grows to what one frame's uploads need while loads queue, never takes more than a
quarter of the room the pool has left, shrinks when that room shrinks, and goes away
after a stretch of frames without uploads.
"""
from __future__ import annotations

from dataclasses import dataclass

#: a segment smaller than this is not worth a ring: uploads go from client memory
MIN_SEGMENT = 64 << 10
#: frames without an upload after which the ring is given back
IDLE_FRAMES = 60
#: the ring takes at most this fraction of the room it could take
ROOM_SHARE = 4


@dataclass(frozen=True)
class StagingNeed:
    """One frame's numbers. `uploaded`: bytes uploaded this frame (through the ring or
    not); `waiting`: bytes read and still waiting for their upload (loads queue);
    `room`: what the ring may occupy without the streamer going over its pool: its own
    bytes now plus the pool's free room; `idle_frames`: frames in a row without uploads."""

    uploaded: int
    waiting: int
    room: int
    idle_frames: int


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 0 else 0


def segment_bytes(current: int, need: StagingNeed, segments: int, cap: int) -> int:
    """The ring's segment size for the coming frames (0: no ring). Sizes are powers of two,
    so the ring is remade only when the need doubles or the room halves."""
    if need.idle_frames >= IDLE_FRAMES or cap < MIN_SEGMENT:
        return 0
    want = need.uploaded + need.waiting
    target = max(current, _pow2_ceil(want)) if want > current else current
    target = min(target, _pow2_floor(cap))
    limit = max(0, need.room) // (ROOM_SHARE * segments)
    if target > limit:
        target = _pow2_floor(limit)
    return target if target >= MIN_SEGMENT else 0
