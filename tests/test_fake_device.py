"""The render-target set and the allocator's out-of-memory path, without GL: the fake device
runs the real allocator, ledger and leak tracker over placeholder objects, and a fault
injector fails exactly the allocations a test names."""
from __future__ import annotations

import pytest

from engine.errors import GLOutOfMemoryError
from engine.gl.fake import FakeDevice
from engine.resolution.policy import ResolutionSettings
from engine.resolution.targets import RenderTargetSet, default_targets_spec

OUT = (640, 360)


def test_target_bytes_are_ledgered_exactly_and_released():
    dev = FakeDevice()
    spec = default_targets_spec()
    with dev.leak_check():
        targets = RenderTargetSet(dev, spec, OUT, 0.5)
        assert dev.ledger.category_total("target") == spec.bytes_at(*OUT, 0.5) == targets.nbytes
        event = targets.resize(0.75)
        assert not event.failed and dev.ledger.category_total("target") == spec.bytes_at(*OUT, 0.75)
        # default order: new made before old released, so the peak held both
        assert event.peak_bytes == spec.bytes_at(*OUT, 0.5) + spec.bytes_at(*OUT, 0.75)
        targets.release()
    assert dev.ledger.total == 0


def test_oom_falls_back_along_the_controllers_ladder():
    dev = FakeDevice()
    spec = default_targets_spec()
    ladder = ResolutionSettings(min_scale=0.25, step=0.25).grid()  # 0.25, 0.5, 0.75, 1.0
    limit = spec.bytes_at(*OUT, 0.5) // 3  # colour targets above this fail, as GL OOM would
    with dev.leak_check():
        targets = RenderTargetSet(dev, spec, OUT, 1.0, ladder=ladder)
        dev.fault_injector = lambda what, nbytes: "color" in what and nbytes > limit
        event = targets.resize(0.75, release_first=True)
        dev.fault_injector = None
        # the old set was released first; the fallback walked the ladder down to what fits
        assert event.failed and targets.scale == 0.25
        assert dev.ledger.category_total("target") == spec.bytes_at(*OUT, 0.25)
        targets.release()
    assert dev.ledger.total == 0 and not dev.live_objects()


def test_failed_allocation_leaves_nothing_made_ledgered_or_tracked():
    dev = FakeDevice()
    dev.fault_injector = lambda what, nbytes: nbytes > 1 << 20
    with pytest.raises(GLOutOfMemoryError):
        dev.storage_texture("BC7", 4096, 4096, levels=13, label="too big")
    assert dev.ledger.total == 0 and not dev.live_objects()
    small = dev.storage_texture("BC7", 256, 256, levels=9, label="fits")
    assert dev.ledger.total == small.nbytes
    dev.release(small)
    assert small.released and dev.ledger.total == 0
