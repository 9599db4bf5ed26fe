"""The detail encoder's queue: what a zoom's new target waits behind (no GL, no processes)."""
from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

from engine.view import encoder
from engine.view.encoder import DetailEncoder, Job, detail_slots
from engine.view.priority import THUMB


class _Pool:
    """Records what is submitted; nothing runs until a test finishes a future."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, Future]] = []

    def submit(self, fn, *args) -> Future:
        fut: Future = Future()
        self.submitted.append((fn.__name__, fut))
        return fut

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


@pytest.fixture
def pool(monkeypatch) -> _Pool:
    fake = _Pool()
    monkeypatch.setattr(encoder, "process_pool", lambda workers, background=False: fake)
    return fake


def _jobs(details: int, thumbs: int) -> list[Job]:
    out = [Job(i, 0, f"/src/{i}.jpg", f"/cache/{i}", (0, 0, 64, 64), False)
           for i in range(details)]
    out += [Job(details + i, THUMB, f"/src/t{i}.jpg", f"/cache/t{i}", (0, 0, 64, 64), False)
            for i in range(thumbs)]
    return out


@pytest.mark.parametrize("workers, slots", [(1, 2), (2, 3), (16, 18)])
def test_detail_queues_only_a_few_deep_while_first_pictures_fill_the_rest(pool, workers,
                                                                          slots):
    jobs = _jobs(4 * workers, 4 * workers)
    enc = DetailEncoder(jobs, "bc1", 256, workers, 1 << 30)
    enc.pump([(j.item, j.k) for j in jobs])  # every detail job asked for first
    kinds = [name for name, _ in pool.submitted]
    assert kinds.count("encode_chunk") == detail_slots(workers) == slots
    assert kinds.count("make_thumbnail") == 2 * workers - slots


def test_a_new_target_is_next_once_a_detail_job_finishes(pool, monkeypatch):
    workers = 16
    jobs = _jobs(100, 0)
    enc = DetailEncoder(jobs, "bc1", 256, workers, 1 << 30)
    enc.pump([(i, 0) for i in range(100)])
    assert len(pool.submitted) == detail_slots(workers)
    monkeypatch.setattr(encoder.cache, "chunk_path", lambda *a: "/cache/c.ktx2")
    pool.submitted[0][1].set_result(0.5)  # one chunk written
    target = (99, 0)  # the view moved: the last image is wanted first now
    enc.pump([target] + [(i, 0) for i in range(99)])
    assert len(pool.submitted) == detail_slots(workers) + 1
    assert enc._running[pool.submitted[-1][1]] == ("chunk", target)


def test_the_gpu_takes_the_decoded_chunk_the_screen_wants_first(pool):
    enc = DetailEncoder(_jobs(3, 0), "bc1", 256, 1, 1 << 30)
    pixels = np.zeros((4, 4, 4), np.uint8)
    enc._ready = [((0, 0), pixels), ((2, 0), pixels), ((1, 0), pixels)]
    enc._order = [(1, 0), (2, 0), (0, 0)]
    assert enc._most_wanted_ready() == 2
    enc._order = []  # nothing asked yet: the oldest
    assert enc._most_wanted_ready() == 0


def test_the_most_wanted_chunk_is_decoded_for_the_gpu_past_the_ready_limit(pool):
    enc = DetailEncoder(_jobs(6, 0), "bc1", 256, 4, 1 << 30, gpu=object())
    enc.pump([(i, 0) for i in range(6)])
    assert len(pool.submitted) == encoder.GPU_READY_MAX  # the GPU is the bottleneck
    target = (5, 0)  # a zoom: the last image is wanted first now
    enc._submit([target] + [(i, 0) for i in range(5)])
    assert enc._running[pool.submitted[-1][1]] == ("pixels", target)
    assert len(pool.submitted) == encoder.GPU_READY_MAX + 1
    enc._submit([(4, 0), target])  # the next one still waits for the GPU
    assert len(pool.submitted) == encoder.GPU_READY_MAX + 1
