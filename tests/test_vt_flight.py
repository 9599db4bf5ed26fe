"""A deterministic multi-stop flight: a camera cuts between views of a wall of virtual
textures, from close-ups to the whole wall, with only GPU feedback driving residency and
the reads served at a fixed bandwidth and latency (PacedReads: no thread timing). Every stop
must reach 95% of its feedback pixels at their wanted tile within a bound of frames, and no
read may be thrown away: on the H200 a cut to 83 panels never converged while its reads
were cancelled under way and asked again."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from vt_helpers import chain_file, paced_reads, wait_tiled

from lab.virtual import stop_views, wall_extent
from engine.gl.vt import QuadBatch
from engine.streaming.virtual import keys as tile_keys
from engine.streaming.virtual.quads import QuadRenderer, view_projection, wall
from engine.streaming.virtual.system import VirtualTextureSystem

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.needs("BC1_RGB sampling")]

OUTPUT = (480, 270)
PANELS = 60
HOLD = 24
SIZE = 512
#: Frames from a cut until 95% of the feedback's pixels find their wanted tile resident.
#: The page cache holds what the screen needs (engine/streaming/virtual/sizing.py), not every
#: tile an earlier stop read, so the last cut, to the whole wall, reads most of its 60 tiles
#: and 60 cells at the paced rate again (22 frames measured).
CONVERGE_FRAMES = 24
#: The same flight with 8 uploads a frame and reads that are fast and many (64 under way,
#: 1 frame each): the uploads are the bottleneck, and tiles in hand go up most urgent first
#: (pixels x levels lacking, TilePolicy.plan's order): 11 frames at the last cut measured
#: (13 when they went up coarsest first).
UPLOAD_BOUND_FRAMES = 11


def flight(columns: int, rows: int, stops: int, seed: int) -> list[list]:
    """The bench's random stops, then a cut from a close-up to the whole wall."""
    rng = np.random.default_rng(seed)
    aspect = OUTPUT[0] / OUTPUT[1]
    half_w, half_h = columns * 1.1 / 2, rows * 1.1 / 2
    out = [stop_views(rng, half_w, half_h, HOLD, aspect) for _ in range(stops)]
    close = view_projection((0.6, 0.3, 0.5), (0.5, 0.5, 0.0), aspect)
    whole = view_projection((0.0, 0.0, rows * 1.1), (0.0, 0.0, 0.0), aspect)
    return out + [[close] * HOLD, [whole] * HOLD]


def fly(dev, paths, allowance, concurrency, latency, stops=6, seed=13, reduce=None,
        seen=None, max_uploads=32, frames=None):
    """Frames to converge per stop, the reads thrown away, and the system's totals.
    `reduce`: the feedback reduced on the GPU (None: as the profile says); `seen`, a list
    that gets each frame's reduced feedback (keys and pixel counts); `frames`, one that gets
    each frame's requests, uploads, evictions, slots used and resident fraction."""
    renderer = QuadRenderer(dev, OUTPUT, feedback_scale=0.25)
    vts = VirtualTextureSystem(dev, allowance, max_uploads=max_uploads, io_workers=0,
                               feedback_reduce=reduce)
    reads = paced_reads(vts, concurrency, latency)
    quads = None
    try:
        ids = [vts.register(paths[i % len(paths)]) for i in range(PANELS)]
        wait_tiled(vts)  # the flight reads the default storage
        columns, rows = wall_extent(PANELS)
        quads = QuadBatch(dev, wall(columns, rows, ids, size=1.0, gap=0.1))
        vts.update()
        frame, converged = 0, []
        for views in flight(columns, rows, stops, seed):
            cut, done = frame, None
            for vp in views:
                vts.begin_frame(frame)
                vts.update()
                renderer.draw_feedback(vts, quads, vp, frame)
                dev.end_frame(frame)
                if seen is not None:
                    seen.append((vts.feedback_frame, *vts.last_feedback))
                if frames is not None:
                    st = vts.stats
                    frames.append((st.requests, st.tiles_uploaded, st.evictions,
                                   vts.used_slots(), vts.wanted_resident_fraction()))
                if done is None and vts.feedback_frame >= cut and \
                        vts.wanted_resident_fraction() >= 0.95:
                    done = frame - cut
                frame += 1
            converged.append(done)
        return converged, reads.wasted, sum(st.deferred for st in vts.history)
    finally:
        if quads is not None:
            quads.release()
        renderer.release()
        vts.release()


@pytest.fixture(scope="module")
def wall_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vtflight")
    return [chain_file(d, f"f{i}.ktx2", SIZE, seed=70 + i) for i in range(3)]


@pytest.mark.slow
def test_every_stop_converges_and_no_read_is_thrown_away(dev, wall_files):
    """On a driver without compute (the feedback reduced on the CPU) and with the feedback
    reduced on the GPU, every frame's reduced feedback is the same, and so is the flight."""
    runs = []
    saved = dev.profile
    for reduce in (None, True) if saved.compute else (None,):
        seen: list = []
        dev.profile = replace(saved, compute=False, feedback_reduce="cpu") \
            if reduce is None else saved
        try:
            with dev.leak_check():
                converged, wasted, _ = fly(dev, wall_files, 4 << 20, concurrency=12,
                                           latency=6, reduce=reduce, seen=seen)
        finally:
            dev.profile = saved
        assert all(c is not None and c <= CONVERGE_FRAMES for c in converged), str(converged)
        assert wasted == 0
        runs.append((converged, seen))
    if len(runs) < 2:
        return  # this driver has no compute: the CPU path alone
    (cpu, cpu_seen), (gpu, gpu_seen) = runs
    assert cpu == gpu
    assert len(cpu_seen) == len(gpu_seen)
    for (fa, ka, pa), (fb, kb, pb) in zip(cpu_seen, gpu_seen, strict=True):
        assert fa == fb
        np.testing.assert_array_equal(ka, kb)
        np.testing.assert_array_equal(pa, pb)


def test_a_still_camera_reuses_the_plan_with_the_same_flight(dev, wall_files, monkeypatch):
    """Frames whose plan would be the last one's (`_plan_holds`) skip it: the flight's
    every frame (requests, uploads, evictions, slots, resident fraction) is the same as
    with a plan on every frame, and the holds' settled frames plan nothing."""
    plans: list[int] = []
    planned = VirtualTextureSystem._plan
    monkeypatch.setattr(VirtualTextureSystem, "_plan",
                        lambda self, req: (plans.append(self.frame), planned(self, req)))
    reused: list = []
    fly(dev, wall_files, 4 << 20, concurrency=12, latency=6, stops=3, frames=reused)
    first = len(plans)
    monkeypatch.setattr(VirtualTextureSystem, "_plan_holds", lambda self: False)
    every: list = []
    fly(dev, wall_files, 4 << 20, concurrency=12, latency=6, stops=3, frames=every)
    assert reused == every
    assert len(plans) == first + len(every)
    assert first <= len(every) - 30, first  # settled frames of the holds planned nothing


@pytest.mark.slow
def test_uploads_go_most_urgent_first(dev, wall_files):
    converged, _, _ = fly(dev, wall_files, 4 << 20, concurrency=64, latency=2, max_uploads=8)
    assert all(c is not None and c <= UPLOAD_BOUND_FRAMES for c in converged), str(converged)


def test_the_feedback_shader_writes_the_key_layout(dev, wall_files):
    """The key the GL feedback pass writes unpacks (keys.unpack) to a real tile of the
    texture drawn there: the shader and keys.py agree on the layout."""
    renderer = QuadRenderer(dev, (64, 64), feedback_scale=1.0)
    vts = VirtualTextureSystem(dev, 2 << 20, io_workers=0)
    quads = None
    try:
        ids = [vts.register(wall_files[0]) for _ in range(2)]
        quads = QuadBatch(dev, wall(2, 1, ids, size=1.0, gap=0.0))
        vp = view_projection((0.0, 0.0, 1.2), (0.0, 0.0, 0.0), 1.0)
        image = None
        for frame in range(6):
            vts.begin_frame(frame)
            vts.update()
            renderer.draw_feedback(vts, quads, vp, frame)
            dev.finish()
            got = vts.feedback.poll()
            image = got if got is not None else image
        assert image is not None
        assert image.shape == (64, 64, 2)  # RG32UI: low word, high word
        keys = np.unique(tile_keys.from_words(image))
        keys = keys[keys != 0]
        vt, level, x, y = tile_keys.unpack(keys)
        assert set(vt.tolist()) == set(ids)
        lay = vts.textures[0].layout
        for lv, tx, ty in zip(level.tolist(), x.tolist(), y.tolist(), strict=True):
            gx, gy = lay.grid(lv)
            assert 0 <= lv < lay.levels and tx < gx and ty < gy
    finally:
        if quads is not None:
            quads.release()
        renderer.release()
        vts.release()


def test_uploads_per_frame_follow_the_screen_size(dev, wall_files):
    """A larger screen shows more finest-level tiles at once: the frame's upload cap and
    the reads asked for grow with it (a quarter of a screen's tiles a frame), never below
    the cap the system was made with, and follow the size back down."""
    from engine.streaming.virtual.system import uploads_for_screen

    assert uploads_for_screen(640, 360, 32) == 32  # 15 tiles: the floor
    assert uploads_for_screen(3840, 2160, 32) == 128  # 30 x 17 tiles
    assert uploads_for_screen(3841, 2160, 32) == 132  # a partial column counts
    vts = VirtualTextureSystem(dev, 2 << 20, io_workers=0, max_uploads=32)
    try:
        vts.register(wall_files[0])
        vts.begin_frame(0)
        vts.update()
        assert vts.max_uploads == 32 and vts.policy.max_requests == 128
        vts.fit_screen(3840, 2160)
        assert vts.max_uploads == 128 and vts.policy.max_requests == 512
        vts.fit_screen(1280, 720)
        assert vts.max_uploads == 32 and vts.policy.max_requests == 128
    finally:
        vts.release()
