"""The streamer on llvmpipe: hard budget on every frame (transients included), a still camera
makes zero residency changes, vanished/truncated files are survived, no leaks."""
from __future__ import annotations

import random
import time

import pytest
from streaming_helpers import make_textures, row_view, step

from engine.memory.governor import Governor
from engine.memory.sizes import texture_bytes
from engine.streaming.levels.streamer import LevelStreamer
from engine.memory.budget import Budget


COUNT = 24


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_textures(tmp_path_factory.mktemp("stream"), COUNT, 256)


@pytest.fixture
def gov():
    """The budget's owner, as the frame loop has it: each frame grants the streamer its pool."""
    return Governor(budget=Budget("1GiB"))


def run_frames(dev, gov, streamer, frames, eye_fn, budget_fn=None, start=0):
    """Run frames; returns (per-frame ledger samples, budgets in force)."""
    samples, budgets = [], []
    dev.ledger.reset_frame_peak()  # earlier tests' objects are gone: measure from here
    for f in range(start, start + frames):
        if budget_fn is not None:
            gov.set_budget(budget_fn(f))
        step(dev, gov, streamer, row_view(f, eye_fn(f), COUNT))
        samples.append(dev.end_frame(f))
        budgets.append(gov.budget_bytes)
    return samples, budgets


@pytest.mark.needs("BC1_RGB sampling")
def test_streams_visible_detail_and_respects_budget(device, gov, files):
    full = texture_bytes("BC1_RGBA", 256, 256, levels=9) * COUNT
    s = LevelStreamer(device, backend="realloc", staging_bytes=64 << 10)
    try:
        gov.set_budget(device.ledger.total + full // 3)  # the ring is part of the budget
        for i, p in enumerate(files):
            s.register(f"t{i}", p)
        tails = s.stats()
        samples, budgets = run_frames(device, gov, s, 200, lambda f: (f * 0.18, 0.0, 1.5))
        for smp, b in zip(samples, budgets):
            assert smp.peak_bytes <= b, (smp.frame, smp.peak_bytes, b)
        st = s.stats()
        assert st.loads > 0 and st.budget_violations == 0
        assert st.resident_bytes > tails.resident_bytes
    finally:
        s.release()


def test_still_camera_makes_zero_changes(device, gov, files):
    s = LevelStreamer(device, backend="realloc")
    try:
        for i, p in enumerate(files):
            s.register(f"t{i}", p)
        for f in range(300):  # settle: reads arrive from the I/O threads
            step(device, gov, s, row_view(f, (8.0, 0.0, 2.0), COUNT))
            time.sleep(0.002)
        before = s.residency_changes
        assert before > 0
        for f in range(300, 600):
            step(device, gov, s, row_view(f, (8.0, 0.0, 2.0), COUNT))
        assert s.residency_changes == before
    finally:
        s.release()


def test_random_budget_stress_with_io_latency(device, gov, files):
    full = texture_bytes("BC1_RGBA", 256, 256, levels=9) * COUNT
    rng = random.Random(3)
    s = LevelStreamer(device, backend="realloc", io_latency_ms=(0.0, 4.0))
    budgets_seq = {}
    try:
        for i, p in enumerate(files):
            s.register(f"t{i}", p)
        floor = device.ledger.total + (256 << 10)

        def budget(f):
            if f % 15 == 0:
                budgets_seq[f] = max(floor, int(full * rng.uniform(0.05, 1.2)))
            return budgets_seq[max(k for k in budgets_seq if k <= f)]
        samples, budgets = run_frames(device, gov, s, 400,
                                      lambda f: (rng.uniform(0, 34), 0.0, rng.uniform(0.6, 6)),
                                      budget)
        prev = budgets[0]
        for smp, b in zip(samples, budgets):
            assert smp.total_bytes <= b, smp  # a cut is answered within the frame
            if b >= prev:
                assert smp.peak_bytes <= b, smp  # transients included
            prev = b
        assert s.stats().budget_violations == 0
    finally:
        s.release()


def test_vanished_and_truncated_files_are_survived(device, gov, tmp_path, caplog):
    paths = make_textures(tmp_path, 4, 256)
    s = LevelStreamer(device, backend="realloc")
    try:
        for i, p in enumerate(paths):
            s.register(f"t{i}", p)
        paths[0].unlink()
        data = paths[1].read_bytes()
        paths[1].write_bytes(data[: len(data) // 3])
        for f in range(120):
            step(device, gov, s, row_view(f, (2.25, 0.0, 3.5), 4, viewport=(1280, 960)))
            time.sleep(0.002)
        st = s.stats()
        assert st.io_errors >= 1
        assert s.items[0].failed and s.items[1].failed  # each reported once, kept at its tail
        assert not s.items[2].failed and not s.items[3].failed
        assert s.items[3].base < s.items[0].base  # the others went on streaming
    finally:
        s.release()


def test_thousands_of_level_changes_leave_no_leaks(device, gov, files):
    full = texture_bytes("BC1_RGBA", 256, 256, levels=9) * COUNT
    s = LevelStreamer(device, backend="realloc",
                        policy=__import__("engine.streaming.levels.state", fromlist=["x"]).PolicyConfig(
                            evict_delay_frames=1, max_ops=64))
    try:
        for i, p in enumerate(files):
            s.register(f"t{i}", p)
        f = 0
        while s.residency_changes < 2000 and f < 3000:
            s.mip_bias = -2.5 if (f // 10) % 2 == 0 else 8.0  # want everything, then nothing
            step(device, gov, s, row_view(f, (17.0, 0.0, 16.0), COUNT, viewport=(1280, 960)))
            device.end_frame(f)
            f += 1
            time.sleep(0.0005)
        assert s.residency_changes >= 2000, s.residency_changes
        assert device.ledger.peak <= max(full * 3, gov.budget_bytes)
    finally:
        s.release()


def test_big_levels_go_up_in_bands_within_budget(device, gov, tmp_path):
    """Levels above max_band_bytes upload in bands over several frames: the texture ends
    bit-exact, the budget holds on every frame, a budget cut mid-load aborts it cleanly."""
    paths = make_textures(tmp_path, 6, 256, "BC7")
    s = LevelStreamer(device, backend="realloc", max_band_bytes=8 << 10)
    try:
        for i, p in enumerate(paths):
            s.register(f"b{i}", p)
        gov.set_budget(device.ledger.total + (1 << 20))
        device.ledger.reset_frame_peak()
        banded_frames = 0
        for f in range(200):
            step(device, gov, s, row_view(f, (3.75, 0.0, 2.0), 6, viewport=(1920, 1080)))
            banded_frames += bool(s.bands.partials)
            smp = device.end_frame(f)
            assert smp.peak_bytes <= gov.budget_bytes, smp
            time.sleep(0.001)
        assert banded_frames > 10 and not s.bands.partials
        full = [t for t, it in enumerate(s.items) if it.base == 0]
        assert full, [it.base for it in s.items]
        for t in full:  # the GPU holds exactly the file's level 0
            assert device.commands.read_level(s.items[t].tex, 0) == s.items[t].tf.read_level(0)
        # a cut while bands are in flight: partial loads are aborted, nothing leaks
        s.mip_bias = 8.0
        for f in range(200, 260):
            step(device, gov, s, row_view(f, (3.75, 0.0, 2.0), 6, viewport=(1920, 1080)))
        s.mip_bias = -3.0
        step(device, gov, s, row_view(260, (3.75, 0.0, 2.0), 6, viewport=(1920, 1080)), end=False)
        time.sleep(0.05)
        step(device, gov, s, row_view(261, (3.75, 0.0, 2.0), 6, viewport=(1920, 1080)), end=False)
        gov.set_budget(device.ledger.total - 1)
        step(device, gov, s, row_view(262, (3.75, 0.0, 2.0), 6, viewport=(1920, 1080)), end=False)
        assert device.ledger.total <= gov.budget_bytes
    finally:
        s.release()


def test_preload_refuses_at_once_what_the_pool_cannot_hold(device, files, caplog):
    """A pool too small for every chain at level 0: preload says so at once instead of
    evicting one texture to load another until its timeout."""
    s = LevelStreamer(device, backend="realloc")
    try:
        for i, p in enumerate(files[:6]):
            s.register(f"p{i}", p)
        s.grant(texture_bytes("BC1_RGBA", 256, 256, levels=9) * 3)
        start = time.perf_counter()
        assert not s.preload(level=0, timeout=30.0)
        assert time.perf_counter() - start < 5.0
        assert any("cannot fit the pool" in r.getMessage() for r in caplog.records)
    finally:
        s.release()


def test_preload_makes_every_texture_resident(device, files):
    """Without any frame drawn, preload streams every chain in (the tiered policy must treat
    the preloaded textures as visible, not as merely recent)."""
    s = LevelStreamer(device, backend="realloc")
    try:
        for i, p in enumerate(files[:6]):
            s.register(f"p{i}", p)
        s.grant(64 << 20)
        assert s.preload(level=0, timeout=30.0)
        assert all(item.base == 0 for item in s.items)
    finally:
        s.release()


@pytest.mark.needs("BC1_RGB sampling")
def test_eviction_with_no_room_for_a_copy_goes_through_the_host(device, gov, files):
    """A budget cut below what is held: a reallocating eviction would hold old and new
    storage at once, so even a tail-sized copy has no room. The streamer never holds more
    than it did when the cut came, and the kept levels (read back, then uploaded into the
    smaller storage) are the file's."""
    from engine.textures import open_texture

    s = LevelStreamer(device, backend="realloc", staging_bytes=0)  # no ring to give back
    try:
        for i, p in enumerate(files):
            s.register(f"t{i}", p)
        run_frames(device, gov, s, 40, lambda f: (12.0, 0.0, 1.2))  # close: fine levels in
        before = s.resident_levels()
        held = device.ledger.total
        samples, _ = run_frames(device, gov, s, 20, lambda f: (12.0, 0.0, 1.2),
                                budget_fn=lambda f: held - 40_000, start=40)
        assert max(smp.peak_bytes for smp in samples) <= held
        after = s.resident_levels()
        shrunk = [i for i in range(COUNT) if after[i] > before[i]]
        assert shrunk, (before, after)
        tex, item = s.items[shrunk[0]].tex, s.items[shrunk[0]]
        tf = open_texture(files[shrunk[0]])
        for lvl in range(item.base, len(tf.levels)):
            assert device.commands.read_level(tex, lvl) == tf.read_level(lvl)
    finally:
        s.release()


@pytest.mark.parametrize("fails", ["new", "all"])
def test_a_shrink_through_the_host_survives_gl_out_of_memory(device, gov, files, fails):
    """The budget falls below what is resident, so textures shrink through the host (no room
    for old and new storage at once), and the new storage cannot be made ("new"): such a
    texture keeps its coarsest level alone (one whose shrink by a GPU copy fails keeps its
    old storage). Where GL cannot make even that block ("all") it is left with no storage
    and binds as nothing. Either way the frames go on, every texture binds, and each
    failure is reported once; where storage was made the plan's state says what it is."""
    s = LevelStreamer(device, backend="realloc", io_workers=0)
    events = []
    unsubscribe = device.faults.subscribe(events.append)
    try:
        for i, p in enumerate(files[:6]):
            s.register(f"t{i}", p)
        for f in range(60):
            step(device, gov, s, row_view(f, (3.0, 0.0, 1.2), 6))
        loaded = [it.base for it in s.items]
        assert min(loaded) == 0
        last = len(s.items[0].tf.levels) - 1
        tail = s.registry.tail(s.items[0])
        storage = f"@{tail}'" if fails == "new" else "@"
        device.fault_injector = lambda what, nbytes: "'t" in what and storage in what
        try:
            others = device.ledger.total - device.ledger.category_total("texture.streamed")
            gov.set_budget(others + 20_000)
            for f in range(60, 70):
                step(device, gov, s, row_view(f, (3.0, 0.0, 1.2), 6))
                for t in range(6):
                    s.bind(t, 0)
                s.resident_textures()
        finally:
            device.fault_injector = None
        bases = [it.base for it in s.items]
        failed = [t for t, b in enumerate(loaded) if b < tail]
        assert failed and len(events) == len(failed)
        lost = [t for t in failed if s.items[t].tex is None]
        if fails == "new":
            assert not lost and last in bases
            for t in failed:
                assert bases[t] in (last, loaded[t])
                assert s._state.resident_base[t] == bases[t]
        else:
            assert lost and last not in bases
    finally:
        unsubscribe()
        s.release()


def test_a_failed_upload_streams_again_after_its_back_off(device, gov, files):
    """GL refuses a texture's finer storage (out of memory) for a while: it keeps what it
    has, reported once, and tries again after a back-off that doubles; once the refusal has
    passed it streams to the detail the view wants, with no second report. The streamer's
    clock is driven by hand (a frame is 1/60 s)."""
    clock = [0.0]
    s = LevelStreamer(device, backend="realloc", io_workers=0, clock=lambda: clock[0])
    events = []
    unsubscribe = device.faults.subscribe(events.append)

    def frames(n: int, start: int) -> None:
        for f in range(start, start + n):
            clock[0] += 1 / 60
            step(device, gov, s, row_view(f, (0.0, 0.0, 1.2), 4))

    try:
        for i, p in enumerate(files[:4]):
            s.register(f"t{i}", p)
        tail = s.registry.tail(s.items[0])
        device.fault_injector = lambda what, nbytes: "t0@" in what
        try:
            refused = device.ledger.total
            frames(210, 0)  # 3.5 s: the first try, retries at 1 s and 3 s
            assert s.items[0].base == tail and s.items[0].failed
            assert min(it.base for it in s.items[1:]) == 0  # the others went on
            assert s.executor.retries.failures[0] == 3
            assert device.ledger.total >= refused
        finally:
            device.fault_injector = None
        frames(300, 210)  # the next retry is due at 7 s
        assert s.items[0].base == 0 and not s.items[0].failed
        assert 0 not in s.executor.retries.failures
        assert len(events) == 1 and "t0" in str(events[0])
    finally:
        unsubscribe()
        s.release()
