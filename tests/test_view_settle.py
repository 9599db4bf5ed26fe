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


def test_a_headless_run_goes_on_until_its_picture_settles(device, tmp_path, isolated_cache):
    """`settle_frames` (what --wait-detail sets): past `frames`, frames go on only until one
    says `settled`, so the screenshot is the complete picture."""
    from PIL import Image

    from engine.hosts.run import run_scene
    from engine.view.wall import ImageWall

    for i in range(2):
        Image.new("RGB", (300, 200), (40 * i, 90, 200)).save(tmp_path / f"{i}.png")
    wall = ImageWall([tmp_path], detail=False, workers=1, progress=False)
    wall.make_thumbnails()  # no placeholders: the frames count the levels fading in
    result = run_scene(wall, device=device, frames=1, settle_frames=200, size=(160, 90),
                       provider="streaming", budget="64MiB", deterministic=True, dt=0.25,
                       on_frame=wall.hooks())
    settled = [f["settled"] for f in result.frames]
    assert 1 < len(settled) < 201 and settled[-1] and not any(settled[:-1]), settled
    assert wall.detail_clock.frame == len(settled) - 1
