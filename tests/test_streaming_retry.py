"""engine.streaming.levels.retry, without GL: a failed upload waits FIRST_S, doubling with
each further failure up to LAST_S; a texture is ready once per failure; a success resets
the wait; a forgotten texture is never ready."""
from __future__ import annotations

from engine.streaming.levels.retry import FIRST_S, LAST_S, UploadRetries


def test_the_wait_doubles_up_to_its_cap_and_a_success_resets_it():
    r = UploadRetries()
    waits = [r.failed(7, 100.0) - 100.0 for _ in range(10)]
    assert waits[:4] == [FIRST_S, 2 * FIRST_S, 4 * FIRST_S, 8 * FIRST_S]
    assert max(waits) == LAST_S and waits[-1] == LAST_S
    r.succeeded(7)
    assert r.failed(7, 200.0) == 200.0 + FIRST_S


def test_a_texture_is_ready_once_when_its_wait_is_over():
    r = UploadRetries()
    r.failed(1, 0.0)
    r.failed(2, 0.0)
    r.failed(2, 0.0)  # a second failure: waits 2 * FIRST_S from now
    assert r.ready(FIRST_S * 0.5) == []
    assert r.ready(FIRST_S) == [1]
    assert r.ready(FIRST_S) == []  # once per failure
    assert r.ready(2 * FIRST_S) == [2]


def test_a_forgotten_texture_is_never_ready():
    r = UploadRetries()
    r.failed(3, 0.0)
    r.forget(3)
    assert r.ready(LAST_S * 10) == [] and 3 not in r.failures
