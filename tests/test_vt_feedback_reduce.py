"""The feedback image reduced on the GPU (engine/gl/feedback_reduce.py) gives exactly the CPU
reduction's keys and pixel counts (requests.reduce_feedback) on the same image; a frame the
hash table cannot hold spills to the CPU path instead of losing keys; the buffers are priced
with the feedback pass; and which drivers reduce on the GPU is the profile's decision."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.gl.feedback_reduce import FeedbackReadback, FeedbackReducer, entries
from engine.gl.vt import DepthFeedbackTarget
from engine.render.vt_feedback import feedback_specs, vt_feedback_size
from engine.streaming.virtual import keys as tile_keys
from engine.streaming.virtual.requests import reduce_feedback, reduce_readback

COMPUTE = pytest.mark.needs("compute shaders")


def _words(keys: np.ndarray) -> np.ndarray:
    """An (h, w) uint64 key image as the readback's (h, w, 2) uint32 words."""
    return np.ascontiguousarray(keys, np.uint64).view(np.uint32).reshape(*keys.shape, 2)


def _image(rng: np.random.Generator, w: int, h: int, unique: int, run: int) -> np.ndarray:
    """A feedback-like image: runs of `run` equal keys drawn from `unique` tiles, a band of
    empty pixels, and the key whose low word is 0 (texture 0, level 0, tile 0, 0)."""
    keys = tile_keys.pack(rng.integers(0, 50, unique), rng.integers(0, 9, unique),
                          rng.integers(0, 64, unique), rng.integers(0, 64, unique))
    flat = np.repeat(keys[rng.integers(0, unique, -(-w * h // run))], run)[:w * h]
    img = flat.reshape(h, w)
    img[: h // 8] = 0
    img[h // 2, : w // 3] = tile_keys.pack(0, 0, 0, 0)
    return img


@pytest.fixture
def reducer(device):
    r = FeedbackReducer(device, ring=2, label="test.reduce")
    yield r
    r.release()


def _gpu(device, reducer: FeedbackReducer, words: np.ndarray):
    h, w = words.shape[:2]
    tex = device.texture((w, h), 2, words.tobytes(), dtype="u4", label="test.feedback")
    try:
        reducer.dispatch(tex, (w, h), 1)
        device.finish()
        return reducer.read(1)
    finally:
        device.release(tex)


@COMPUTE
@pytest.mark.parametrize("w, h, unique, run", [(160, 90, 300, 7), (97, 31, 40, 1),
                                               (480, 270, 900, 24)])
def test_the_gpu_list_equals_the_cpu_reduction(device, reducer, w, h, unique, run) -> None:
    words = _words(_image(np.random.default_rng(w), w, h, unique, run))
    got = _gpu(device, reducer, words)
    assert got is not None, "a list that fits must not spill"
    gpu_words, pixels = got
    keys, counts = reduce_readback(FeedbackReadback(0, words=gpu_words, pixels=pixels))
    want_keys, want_counts = reduce_feedback(words)
    np.testing.assert_array_equal(keys, want_keys)
    np.testing.assert_array_equal(counts, want_counts)


@COMPUTE
@pytest.mark.parametrize("load", [70, 95])
def test_a_nearly_full_table_lists_exactly_or_spills(device, reducer, load) -> None:
    """Keys at 70% and 95% of the table's slots: long probe runs; the list, where there is
    one, holds every key with its pixels (a run past the probe limit spills instead: at 95%
    here, listed up to 90%)."""
    w, h = 64, 36
    rng = np.random.default_rng(9)
    unique = entries((w, h)) * load // 100
    i = rng.permutation(1 << 16)[:unique]  # distinct tiles of 64 textures
    keys = tile_keys.pack(i >> 10, (i >> 8) & 3, i & 15, (i >> 4) & 15)
    img = keys[np.r_[np.arange(unique), rng.integers(0, unique, w * h - unique)]]
    words = _words(img.reshape(h, w))
    got = _gpu(device, reducer, words)
    if got is None:
        assert load > 90 and reducer.spilled_frames == 1
        return
    listed = reduce_readback(FeedbackReadback(0, words=got[0], pixels=got[1]))
    want = reduce_feedback(words)
    np.testing.assert_array_equal(listed[0], want[0])
    np.testing.assert_array_equal(listed[1], want[1])


@COMPUTE
def test_an_empty_frame_is_an_empty_list(device, reducer) -> None:
    words, pixels = _gpu(device, reducer, np.zeros((36, 64, 2), np.uint32))
    assert words.shape == (0, 2) and pixels.size == 0


@COMPUTE
def test_more_keys_than_the_table_holds_spill_and_nothing_is_lost(device) -> None:
    """A frame of all-distinct keys (more than the table's slots), or with a key outside the
    layout, is not listed: `poll_feedback` hands over the image, whose CPU reduction is the
    whole answer, and the next frame that fits is listed again."""
    target = DepthFeedbackTarget(device, reduce=True, label="test.spill")
    w, h = 96, 48
    rng = np.random.default_rng(5)
    distinct = rng.choice(1 << 40, w * h, replace=False).astype(np.uint64).reshape(h, w) + 1
    outside = _image(rng, w, h, 20, 5)
    outside[3, 3] = np.uint64(1 << 63)
    fitting = _image(rng, w, h, 20, 5)
    try:
        assert w * h > entries((w, h))
        for frame, img in enumerate((distinct, outside, fitting)):
            assert target.begin((w, h))
            target._color.write(_words(img).tobytes())
            target.end(frame)
            device.finish()
            got = target.poll_feedback()
            assert got is not None and got.frame == frame
            spilled = frame < 2
            assert (got.words is None) == spilled and (got.image is None) == (not spilled)
            keys, counts = reduce_readback(got)
            want = reduce_feedback(_words(img))
            np.testing.assert_array_equal(keys, want[0])
            np.testing.assert_array_equal(counts, want[1])
        assert target.reducer.spilled_frames == 2
    finally:
        target.release()


@COMPUTE
def test_out_of_memory_for_the_list_leaves_nothing_behind(device) -> None:
    """GL out of memory for one of the reducer's buffers: a typed error, the buffers made
    before it released, and the next reserve makes them all."""
    from engine.errors import GLOutOfMemoryError

    reducer = FeedbackReducer(device, ring=2, label="test.oom")
    before = device.ledger.total
    try:
        device.fault_injector = lambda what, nbytes: "test.oom.list" in what
        with pytest.raises(GLOutOfMemoryError):
            reducer.reserve((64, 36))
        assert device.ledger.total == before and reducer.nbytes == 0
        device.fault_injector = None
        reducer.reserve((64, 36))
        assert reducer.nbytes == 4 * 64 * 36 * 2
    finally:
        device.fault_injector = None
        reducer.release()
    assert device.ledger.total == before


@COMPUTE
def test_the_reduction_is_priced_with_the_feedback_pass(device) -> None:
    """The resolution controller's price of the pass (`feedback_specs`) is what the target
    with its reducer holds in the ledger, to the byte, at sizes that do not divide by 8."""
    for output, scale in (((1280, 720), 1.0), ((333, 211), 0.7)):
        size = vt_feedback_size(output, scale, 0.25)
        before = device.ledger.total
        target = DepthFeedbackTarget(device, reduce=True)
        try:
            target.reserve(size)
            priced = sum(s.bytes(*output, scale) for s in feedback_specs(0.25, True))
            assert priced == target.nbytes == device.ledger.total - before
            cpu_only = sum(s.bytes(*output, scale) for s in feedback_specs(0.25))
            assert target.nbytes - target.reducer.nbytes == cpu_only
        finally:
            target.release()


def test_a_driver_without_compute_gets_no_reducer(device) -> None:
    saved = device.profile
    device.profile = replace(saved, compute=False, feedback_reduce="cpu")
    try:
        target = DepthFeedbackTarget(device)
        assert target.reducer is None
        target.release()
    finally:
        device.profile = saved
