"""TrackedContext is the context: issue 24's examples, one by one (the whole of moderngl's
suite through the wrapper is tests/test_moderngl_suite.py)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import moderngl
import pytest

from engine.gl.tracking import TrackedContext

ROOT = Path(__file__).resolve().parents[1]
BLEND_SRC_RGB, BLEND_DST_RGB, BLEND_EQUATION_RGB = 0x80C9, 0x80C8, 0x8009


def test_state_written_on_the_wrapper_reaches_the_context(engine_device):
    raw, gl = engine_device._ctx, engine_device._raw
    ctx = TrackedContext(raw, engine_device)
    before = (raw.cull_face, raw.front_face)
    try:
        ctx.blend_func = moderngl.ONE, moderngl.ONE  # write-only in moderngl: read from GL
        ctx.blend_equation = moderngl.MAX
        ctx.cull_face = "front"
        ctx.front_face = "cw"
        assert gl.get_int(BLEND_SRC_RGB) == moderngl.ONE == gl.get_int(BLEND_DST_RGB)
        assert gl.get_int(BLEND_EQUATION_RGB) == moderngl.MAX
        assert raw.cull_face == "front" and raw.front_face == "cw"
    finally:
        raw.cull_face, raw.front_face = before
        raw.blend_func, raw.blend_equation = moderngl.DEFAULT_BLENDING, moderngl.FUNC_ADD


def test_samplers_scopes_queries_and_objects_compare_as_on_the_context(engine_device):
    dev = engine_device
    ctx = TrackedContext(dev._ctx, dev)
    assert isinstance(ctx, moderngl.Context) and ctx == dev._ctx and dev._ctx == ctx
    assert hash(ctx) == hash(dev._ctx)
    with dev.leak_check():
        sampler = ctx.sampler()  # was: 'Sampler' object has no attribute 'glo'
        tex = ctx.texture((8, 8), 4)
        fbo = ctx.framebuffer([tex])
        scope = ctx.scope(fbo)  # passed through: no GL memory of its own
        query = ctx.query(time=True)
        assert sampler.ctx == ctx and tex.ctx == ctx and fbo.ctx == ctx
        assert query.elapsed == 0  # passed through: moderngl gives queries no release
        assert {r.type for r in dev.tracker.live()} >= {"sampler", "texture", "framebuffer"}
        for obj in (scope, fbo, tex, sampler):
            obj.release()


def test_external_objects_pass_through_untracked(engine_device):
    dev = engine_device
    ctx = TrackedContext(dev._ctx, dev)
    buf = dev._ctx.buffer(reserve=64)
    try:
        before = dev.ledger.total
        ext = ctx.external_buffer(buf.glo, buf.size)
        assert (ext.glo, ext.size) == (buf.glo, buf.size)
        assert dev.ledger.total == before  # its memory is the app's other buffer
    finally:
        buf.release()


@pytest.mark.slow
def test_release_in_any_order_and_a_clean_exit():
    """The context released first, the device shut down after it, then interpreter exit:
    no crash (the issue's run died with a segmentation fault at exit)."""
    script = textwrap.dedent("""
        import moderngl
        from engine.gl.device import Device
        from engine.gl.tracking import TrackedContext
        raw = moderngl.create_context(standalone=True, backend="egl")
        dev = Device.adopt(raw)
        ctx = TrackedContext(raw, dev)
        keep = [ctx.texture((16, 16), 4), ctx.buffer(reserve=64), ctx.sampler(),
                ctx.program(vertex_shader="#version 330\\nvoid main() { gl_Position = vec4(0); }")]
        keep[0].release()
        raw.release()
        left = dev.shutdown()
        print("left", len(left), dev.ledger.total)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "left 0 0" in done.stdout  # the context took its objects with it


def test_an_object_dropped_without_release_is_a_leak_and_is_freed(engine_device):
    """The issue's most common moderngl leak: a buffer made through the wrapper and dropped
    without release() stays a live record (GL name and bytes named) until it is released
    for the test; one released and then dropped is no leak."""
    import gc

    from engine.errors import LeakError
    from engine.gl.tracking import tracked_context

    ctx = tracked_context(engine_device)
    before = engine_device.ledger.total
    with pytest.raises(LeakError) as err, engine_device.leak_check():
        done = ctx.buffer(reserve=4096)
        done.release()
        dropped = ctx.buffer(reserve=1 << 20)
        glo = dropped.glo
        del done, dropped
        gc.collect()
    assert err.value.leaks[0].glo == glo and len(err.value.leaks) == 1
    assert f"GL name {glo}" in str(err.value) and "1.0 MiB" in str(err.value)
    assert engine_device.ledger.total == before + (1 << 20)
    engine_device.release_records(err.value.leaks)
    engine_device.flush_releases()
    assert engine_device.ledger.total == before
    assert not [r for r in engine_device.live_objects() if r.glo == glo and "user" in r.label]
