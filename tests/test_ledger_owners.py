"""The ledger's owners (engine.memory.ledger, "Owners"): several views drawing with one device
each see their own bytes plus a fair part of what nobody owns, and the views' figures add up
to the device's. No GL: FakeDevice's allocator over the real ledger."""
from __future__ import annotations

import logging

import pytest

from engine.gl.fake import FakeDevice
from engine.memory.ledger import Ledger


def test_each_owner_sees_its_own_bytes_and_a_fair_part_of_the_unowned():
    dev = FakeDevice()
    led = dev.ledger
    shared = dev.buffer(reserve=1001, label="device font")  # before any view: unowned
    a, b = led.owner("a"), led.owner("b")
    with led.attributed(a):
        ta = dev.texture((16, 16), label="a tex")  # 1024 bytes, static
        ra = dev.renderbuffer((8, 8), label="a target")  # 256 bytes, target
    with led.attributed(b):
        tb = dev.texture((32, 32), category="texture.streamed", label="b tex")  # 4096
    assert [x.owner for x in led.items()] == [None, a, a, b]
    with led.attributed(a):
        assert led.by_category() == {"buffer": 501, "texture.static": 1024, "target": 256}
        assert led.total == 501 + 1024 + 256
        assert led.category_total("texture.streamed") == 0
    with led.attributed(b):
        assert led.by_category() == {"buffer": 500, "texture.streamed": 4096}
        assert led.total == 500 + 4096
        assert led.category_total("texture.streamed") == 4096
    # outside a scope, the device's figures; the views' add up to them to the byte
    assert led.total == 1001 + 1024 + 256 + 4096
    parts = []
    for owner in (a, b):
        with led.attributed(owner):
            parts.append(led.total)
    assert sum(parts) == led.total
    # a third view takes its part of the unowned bytes from the other two
    c = led.owner("c")
    with led.attributed(c):
        assert led.total == 333
    led.release_owner(c)
    for obj in (ta, ra, tb, shared):
        dev.release(obj)
    assert led.total == 0 and led.by_category() == {}
    for owner in (a, b):
        with led.attributed(owner):
            assert led.total == 0


def test_frame_samples_and_peaks_are_per_owner():
    dev = FakeDevice()
    led = dev.ledger
    a, b = led.owner("a"), led.owner("b")
    with led.attributed(a):
        big = dev.buffer(reserve=1000, label="a transient")
        dev.release(big)  # a peak inside the frame, gone at its end
        keep = dev.buffer(reserve=100, label="a kept")
        sample = dev.end_frame(0)
        assert (sample.total_bytes, sample.peak_bytes) == (100, 1000)
    with led.attributed(b):
        other = dev.buffer(reserve=10, label="b")
        sample = dev.end_frame(0)
        assert (sample.total_bytes, sample.peak_bytes) == (10, 10)  # a's transient not b's
        assert [s.total_bytes for s in led.history] == [10]
    with led.attributed(a):
        assert [s.peak_bytes for s in led.history] == [1000]
        led.reset_frame_peak()
        assert dev.end_frame(1).peak_bytes == 100
    assert led.history == [] and led.peak == 1000  # the device's own: lifetime figures
    # unowned bytes made while views exist raise every view's frame peak by its part
    shared = dev.buffer(reserve=50, label="shared")
    dev.release(shared)
    for owner, peak in ((a, 125), (b, 35)):
        with led.attributed(owner):
            assert dev.end_frame(2).peak_bytes == peak
    for obj in (keep, other):
        dev.release(obj)


def test_resizing_in_place_keeps_the_owner():
    """A sparse texture's commit changes its size in place (Allocator.reaccount), maybe in
    another view's scope: the bytes stay the view's that made it."""
    dev = FakeDevice()
    led = dev.ledger
    a, b = led.owner("a"), led.owner("b")
    with led.attributed(a):
        tex = dev.buffer(reserve=64, label="sparse")
    with led.attributed(b):
        dev._alloc.reaccount(tex, 4096)
        assert led.total == 0
    with led.attributed(a):
        assert led.total == 4096
    dev.release(tex)


def test_a_released_owner_leaves_what_it_still_holds_unowned(caplog):
    dev = FakeDevice()
    led = dev.ledger
    a, b = led.owner("a"), led.owner("b")
    with led.attributed(a):
        leak = dev.buffer(reserve=300, label="a leak")
    with caplog.at_level(logging.WARNING, logger="engine.memory.ledger"):
        led.release_owner(a)
    assert "still allocated" in caplog.text
    with led.attributed(b):
        assert led.total == 300  # the only view left carries it
    # a scope of a released owner reads as the device; allocations in it are unowned
    with led.attributed(a):
        stray = dev.buffer(reserve=7, label="stray")
        assert led.total == 307
    assert led.items()[-1].owner is None
    for obj in (leak, stray):
        dev.release(obj)
    with led.attributed(b):
        assert led.total == 0
    led.release_owner(b)
    led.release_owner(b)  # idempotent


def test_an_owner_of_another_ledger_is_refused():
    with pytest.raises(ValueError, match="another ledger"):
        with Ledger().attributed(Ledger().owner("x")):
            pass
