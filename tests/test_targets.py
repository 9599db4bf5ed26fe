"""The render-target executor: exact bytes, both resize orders, and the out-of-memory path.

The ledger is the judge throughout: what `TargetsSpec.bytes_at` predicts is what the device
recorded, to the byte, and a resize's per-frame peak is old + new (or max with release_first).
"""
from __future__ import annotations

import numpy as np
import pytest

from engine.resolution.targets import RenderTargetSet, default_targets_spec
from engine.resolution.targets_spec import TargetSpec, TargetsSpec

OUTPUT = (1283, 721)  # odd sizes: rounding of every target dimension is exercised


def _targets_total(device) -> int:
    return device.ledger.category_total("target")


def _peak_during(device, action):
    """Run `action` inside one ledger frame; return (its result, the frame's peak bytes)."""
    device.end_frame(-1)  # the next frame's peak starts at the current total
    result = action()
    return result, device.end_frame(-1).peak_bytes


@pytest.mark.parametrize("msaa", [1, 4])
def test_ledger_equals_spec_bytes_at_every_scale(device, msaa):
    spec = default_targets_spec(msaa)
    base = _targets_total(device)
    for scale in (1.0, 0.67, 0.5, 0.33, 0.25):
        targets = RenderTargetSet(device, spec, OUTPUT, scale)
        try:
            assert _targets_total(device) - base == spec.bytes_at(*OUTPUT, scale)
            assert targets.nbytes == spec.bytes_at(*OUTPUT, scale)
            assert targets.render_size == spec.render_size(*OUTPUT, scale)
            assert targets.color.size == targets.render_size
            assert targets.fbo.size == targets.render_size
            assert targets.msaa == msaa
        finally:
            targets.release()
    assert _targets_total(device) == base


def test_msaa_resolve_gives_the_drawn_colour(device):
    targets = RenderTargetSet(device, default_targets_spec(4), (64, 48), 0.5)
    try:
        targets.fbo.use()
        targets.fbo.clear(0.25, 0.5, 2.0, 1.0)  # HDR: above 1 survives in RGBA16F
        targets.resolve()
        pixels = np.frombuffer(targets.color.read(), np.float16).reshape(24, 32, 4)
        assert np.allclose(pixels, (0.25, 0.5, 2.0, 1.0))
    finally:
        targets.release()


@pytest.mark.parametrize("release_first", [False, True])
@pytest.mark.parametrize("old,new", [(0.5, 0.75), (0.75, 0.5)])
def test_resize_really_reallocates_and_peak_matches_order(device, release_first, old, new):
    spec = default_targets_spec()
    targets = RenderTargetSet(device, spec, OUTPUT, old)
    try:
        others = _targets_total(device) - targets.nbytes
        old_bytes, new_bytes = spec.bytes_at(*OUTPUT, old), spec.bytes_at(*OUTPUT, new)
        old_glo = targets.color.glo
        event, peak = _peak_during(device, lambda: targets.resize(new, release_first))
        expected = max(old_bytes, new_bytes) if release_first else old_bytes + new_bytes
        assert peak - others == expected == event.peak_bytes
        assert not event.failed and event.release_first == release_first
        assert (event.old_scale, event.new_scale, event.requested_scale) == (old, new, new)
        assert (event.old_bytes, event.new_bytes) == (old_bytes, new_bytes)
        assert _targets_total(device) - others == new_bytes == targets.nbytes
        assert targets.scale == new and targets.color.size == spec.render_size(*OUTPUT, new)
        assert targets.color.glo != old_glo or release_first  # GL may reuse a freed name
    finally:
        targets.release()


def test_resize_to_same_pixels_keeps_the_targets(device):
    targets = RenderTargetSet(device, default_targets_spec(), (100, 100), 0.5)
    try:
        color = targets.color
        event = targets.resize(0.501)  # round(50.1) == 50: nothing to reallocate
        assert targets.color is color and event.peak_bytes == event.old_bytes
        assert targets.scale == 0.501
    finally:
        targets.release()


def test_set_output_size_reallocates_at_the_same_scale(device):
    spec = default_targets_spec()
    targets = RenderTargetSet(device, spec, (640, 360), 0.5)
    try:
        event = targets.set_output_size(1920, 1080)
        assert event.output_size == targets.output_size == (1920, 1080)
        assert targets.render_size == (960, 540)
        assert targets.nbytes == spec.bytes_at(1920, 1080, 0.5) == event.new_bytes
    finally:
        targets.release()


def test_unsupported_formats_are_refused_before_allocating(device):
    live = len(device.live_objects())
    with pytest.raises(ValueError, match="DEPTH24_STENCIL8"):
        RenderTargetSet(device, TargetsSpec.forward_hdr(), (64, 64))
    with pytest.raises(ValueError, match="resolve"):
        RenderTargetSet(device, TargetsSpec((TargetSpec("color", "RGBA16F", 4),)), (64, 64))
    assert len(device.live_objects()) == live


# -- out of memory (llvmpipe refuses one resource of 2 GiB or more) ----------------------------
HUGE = (16384, 16384)
#: A small target allocated first, then a colour target that is 4 GiB at scale 1: the failure
#: happens half-way through the set, so the cleanup of the half-made set is exercised.
OOM_SPEC = TargetsSpec((TargetSpec("aux", "RGBA8", relative_size=0.25),
                        TargetSpec("color", "RGBA32F")))


@pytest.fixture
def llvmpipe(device):
    if "llvmpipe" not in device.caps.renderer:
        pytest.skip("the 4 GiB refusal is a llvmpipe fact; real GPUs may accept it")
    return device


def _assert_usable(device, targets):
    targets.fbo.use()
    targets.fbo.clear(1.0, 0.0, 0.0, 1.0)
    pixel = np.frombuffer(targets.fbo.read(viewport=(0, 0, 1, 1), components=4, dtype="f4"),
                          np.float32)
    assert pixel.tolist() == [1.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("release_first", [False, True])
def test_out_of_memory_leaves_a_valid_set_and_nothing_half_made(llvmpipe, release_first):
    device = llvmpipe
    targets = RenderTargetSet(device, OOM_SPEC, HUGE, 1 / 16)
    try:
        total, live = device.ledger.total, len(device.live_objects())
        event = targets.resize(1.0, release_first=release_first)
        assert event.failed and "GL_OUT_OF_MEMORY" in event.error
        assert event.requested_scale == 1.0 and event.new_scale == event.old_scale == 1 / 16
        assert targets.scale == 1 / 16 and targets.nbytes == OOM_SPEC.bytes_at(*HUGE, 1 / 16)
        assert device.ledger.total == total and len(device.live_objects()) == live
        _assert_usable(device, targets)
        assert targets.resize(1 / 8).new_scale == 1 / 8  # and it still resizes afterwards
    finally:
        targets.release()


def test_a_pass_with_a_minimum_width_keeps_the_render_aspect() -> None:
    """A feedback-like target: a quarter of the render size, 64 wide at least, never wider
    than the render size; its copies are priced with it."""
    t = TargetSpec("fb", "RGBA8", relative_size=0.25, min_width=64, copies=2)
    assert t.dims(640, 360, 1.0) == (160, 90)
    assert t.dims(640, 360, 0.25) == (64, 36)  # render 160x90: a quarter would be 40 wide
    assert t.dims(200, 100, 0.25) == (50, 25)  # render 50x25: never wider than it
    assert t.bytes(640, 360, 1.0) == 2 * 160 * 90 * 4
    with pytest.raises(ValueError):
        TargetSpec("fb", "RGBA8", min_width=64, follows_scale=False)
    with pytest.raises(ValueError):
        TargetSpec("fb", "RGBA8", copies=0)
