"""`detail_complete_s` is said apart from `first_frame_s`, and only when nothing more can
change the picture (the first warm frame shows the atlas pages' coarsest levels)."""
from __future__ import annotations

from engine.view.settle import DetailClock, frame_complete

QUIET = {"bytes_uploaded": 100, "pending_uploads": 0, "reads_in_flight": 0,
         "missing_tiles": 0}


def test_a_frame_is_complete_only_when_nothing_is_coming():
    assert frame_complete(QUIET, 100, False)
    assert not frame_complete(QUIET, None, False)  # the first frame: registration uploaded
    assert not frame_complete(QUIET, 90, False)  # uploaded since the last frame
    assert not frame_complete(QUIET, 100, True)  # a chunk on screen still to encode
    for key in ("pending_uploads", "reads_in_flight", "missing_tiles"):
        assert not frame_complete({**QUIET, key: 1}, 100, False), key


def test_the_clock_keeps_the_first_complete_frame():
    clock = DetailClock()
    frames = [({**QUIET, "bytes_uploaded": 10, "missing_tiles": 4}, 1.0),
              ({**QUIET, "bytes_uploaded": 60, "missing_tiles": 1}, 1.2),
              ({**QUIET, "bytes_uploaded": 100}, 1.4),
              ({**QUIET, "bytes_uploaded": 100}, 1.6),
              ({**QUIET, "bytes_uploaded": 140}, 1.8)]  # a later move: not the start
    done = [clock.observe(n, rec, False, t) for n, (rec, t) in enumerate(frames)]
    assert done == [False, False, False, True, False]
    assert clock.summary() == {"detail_complete_s": 1.6, "detail_complete_frame": 3}
    assert DetailClock().summary() == {"detail_complete_s": None,
                                       "detail_complete_frame": None}
