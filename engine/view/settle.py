"""When a view's picture is complete, said apart from when its first frame came.

Why: the first frame of a warm wall is drawn from what registration uploaded (the coarsest
levels of the atlas pages and thumbnails) and fills in over the next frames, so a first-frame
time alone reads as "done" too early, and a screen-weighted `at_wanted_fraction` counts a
virtual texture (an atlas page served by tiles) as resident at every level. A frame is
*complete* when nothing more can change what it shows: no chunk on screen is waiting for
the encoder (with `detail=False` the thumbnails are the detail), no level fading in, no level or tile is waiting to be read or uploaded, no tile on screen is missing,
and nothing was uploaded since the previous frame.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def frame_complete(record: Mapping[str, Any], uploaded_before: int | None,
                   waiting: bool) -> bool:
    """Whether the frame of `record` (the frame loop's record) shows all the detail its view
    will get (module docstring); `uploaded_before`: the previous frame's `bytes_uploaded`
    (None for the first frame, which is never complete: registration uploaded what it
    shows); `waiting`: the scene still changes by itself (a chunk on screen to be
    encoded, a level fading in)."""
    return (uploaded_before is not None and not waiting
            and int(record.get("bytes_uploaded", 0)) == uploaded_before
            and int(record.get("pending_uploads", 0)) == 0
            and int(record.get("reads_in_flight", 0)) == 0
            and int(record.get("missing_tiles", 0)) == 0)


@dataclass
class DetailClock:
    """The first complete frame of a run: its number and its time (seconds since the
    process started, as `first_frame_s`); None until one comes. A move of the camera
    afterwards does not reset it: it times the start."""

    frame: int | None = None
    seconds: float | None = None
    _uploaded: int | None = None

    def observe(self, frame: int, record: Mapping[str, Any], waiting: bool,
                now_s: float | None) -> bool:
        """Take one frame's record (`now_s`: None where the process age is unknown);
        True when it is complete."""
        done = frame_complete(record, self._uploaded, waiting)
        self._uploaded = int(record.get("bytes_uploaded", 0))
        if done and self.frame is None:
            self.frame = frame
            self.seconds = None if now_s is None else round(now_s, 3)
        return done

    def summary(self) -> dict[str, Any]:
        """For the run's summary: `detail_complete_s` and `_frame`, null when the run ended
        before its picture was complete."""
        return {"detail_complete_s": self.seconds, "detail_complete_frame": self.frame}
