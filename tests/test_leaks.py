"""Leak checks name deliberately leaked objects and pass once they are released."""
from __future__ import annotations

import threading

import pytest

from engine.gl.tracking import TrackedContext
from engine.errors import LeakError


def test_leak_check_names_engine_objects(engine_device):
    dev = engine_device
    with pytest.raises(LeakError) as info, dev.leak_check():
        tex = dev.storage_texture("BC4", 64, 64, levels=7, label="leaky-texture")
        color = dev.texture((32, 32), label="leaky-color")
        fbo = dev.framebuffer([color], label="leaky-fbo")
        buf = dev.buffer(reserve=1024, label="leaky-buffer")
    msg = str(info.value)
    for name in ("leaky-texture", "leaky-fbo", "leaky-buffer", "leaky-color"):
        assert name in msg
    assert "texture 'leaky-texture'" in msg and "framebuffer 'leaky-fbo'" in msg
    assert "buffer 'leaky-buffer'" in msg and "1.0 KiB" in msg
    assert len(info.value.leaks) == 4
    with dev.leak_check():
        for obj in (fbo, color, buf, tex):
            dev.release(obj)
    # and now a clean block passes
    with dev.leak_check():
        t = dev.storage_texture("BC5", 16, 16, label="clean")
        dev.release(t)


def test_leak_check_names_objects_of_wrapped_user_context(engine_device):
    dev = engine_device
    user = TrackedContext(dev._ctx, dev)
    before = dev.ledger.category_total("user")
    with pytest.raises(LeakError) as info, dev.leak_check():
        tex = user.texture((16, 16), 4)
        fbo = user.framebuffer([tex])
        buf = user.buffer(reserve=256)
        assert dev.ledger.category_total("user") == before + 16 * 16 * 4 + 256
    kinds = sorted(r.type for r in info.value.leaks)
    assert kinds == ["buffer", "framebuffer", "texture"]
    # The user releases through moderngl itself: the tracker and ledger notice.
    with dev.leak_check():
        fbo.release()
        tex.release()
        buf.release()
    assert dev.ledger.category_total("user") == before


def test_release_from_another_thread_is_queued(engine_device):
    dev = engine_device
    with dev.leak_check():
        buf = dev.buffer(reserve=64, label="cross-thread")
        t = threading.Thread(target=dev.release, args=(buf,))
        t.start()
        t.join()
        assert any(r.label == "cross-thread" for r in dev.tracker.live())  # not yet done
        # leak_check's end flushes the queue on the render thread


def test_stacks_are_captured_when_asked(engine_device):
    dev = engine_device
    dev.tracker.capture_stacks = True
    try:
        with pytest.raises(LeakError) as info, dev.leak_check():
            buf = dev.buffer(reserve=8, label="with-stack")
        assert "test_leaks.py" in str(info.value)
    finally:
        dev.tracker.capture_stacks = False
        dev.release(buf)


def test_shutdown_reports_and_releases_leftovers():
    from engine.gl.device import Device
    dev = Device.headless()
    dev.storage_texture("BC4", 32, 32, label="left-over")
    dev.buffer(reserve=16, label="left-buffer")
    left = dev.shutdown()
    assert sorted(r.label for r in left) == ["left-buffer", "left-over"]
    assert dev.ledger.total == 0 and dev.closed
    assert dev.shutdown() == []


def test_pytest_fixture_gl_leak_check(gl_leak_check, engine_device):
    buf = engine_device.buffer(reserve=4, label="fixture")
    engine_device.release(buf)
