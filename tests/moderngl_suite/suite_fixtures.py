"""Fixtures moderngl's own test suite expects, for running it bare or through TrackedContext.

moderngl ships its tests in the sdist without their conftest; this plugin provides the fixture
names they use (`ctx`, `ctx_static`, `ctx_new`, `color_prog`, `ndc_quad`), written here from
what the tests need. `ENGINE_MGL_SUITE=tracked` hands every test a `TrackedContext` over the
same EGL context, with an engine Device adopted on it; `bare` hands the context itself. The
two runs must give the same outcome for every test (tests/test_moderngl_suite.py).
"""
from __future__ import annotations

import json
import os

import moderngl
import numpy as np
import pytest
from glcontext import egl

MODE = os.environ.get("ENGINE_MGL_SUITE", "bare")
_shared: dict = {}


def _new_context() -> moderngl.Context:
    return moderngl.create_context(standalone=True,
                                   context=egl.create_context(glversion=330, mode="standalone"))


def _wrap(ctx: moderngl.Context):
    """The context as this run hands it out, and the device that tracks it (or None)."""
    if MODE != "tracked":
        return ctx, None
    from engine.gl.device import Device
    from engine.gl.tracking import TrackedContext

    device = Device.adopt(ctx)
    return TrackedContext(ctx, device), device


def _shared_context():
    if "ctx" not in _shared:
        raw = _new_context()
        raw.gc_mode = "auto"  # objects a test drops are released when Python collects them
        ctx, device = _wrap(raw)
        _shared.update(ctx=ctx, device=device, raw=raw,
                       fbo=raw.simple_framebuffer((2, 2)))  # something bound for transforms
    ctx = _shared["ctx"]
    ctx.__enter__()
    _shared["fbo"].use()
    return ctx


def _reset(ctx) -> None:
    ctx.blend_func = moderngl.DEFAULT_BLENDING
    ctx.blend_equation = moderngl.FUNC_ADD
    ctx.enable_only(moderngl.NOTHING)
    ctx.point_size = 1.0
    ctx.line_width = 1.0
    ctx.front_face = "ccw"
    ctx.cull_face = "back"
    ctx.wireframe = False
    ctx.provoking_vertex = moderngl.FIRST_VERTEX_CONVENTION
    ctx.polygon_offset = 0.0, 0.0
    ctx.gc()


@pytest.fixture(scope="session")
def ctx_static():
    return _shared_context()


@pytest.fixture
def ctx():
    context = _shared_context()
    if context.error != "GL_NO_ERROR":
        raise RuntimeError(f"GL error left before the test: {context.error}")
    _reset(context)
    yield context
    error = context.error
    _reset(context)
    if error != "GL_NO_ERROR":
        raise RuntimeError(f"GL error left by the test: {error}")


@pytest.fixture
def ctx_new():
    ctx, device = _wrap(_new_context())
    yield ctx
    if device is not None:
        device.shutdown()
    ctx.release()


@pytest.fixture(scope="session")
def color_prog(ctx_static):
    return ctx_static.program(
        vertex_shader="#version 330\nin vec2 in_vert;\n"
                      "void main() { gl_Position = vec4(in_vert, 0.0, 1.0); }\n",
        fragment_shader="#version 330\nuniform vec4 color;\nout vec4 fragColor;\n"
                        "void main() { fragColor = color; }\n")


@pytest.fixture(scope="session")
def ndc_quad(ctx_static):
    return ctx_static.buffer(np.array([-1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0, -1.0],
                                      dtype="f4"))


def pytest_sessionfinish(session, exitstatus):
    """The tracked run ends as an app would: the device is shut down, then the context. It
    writes how many objects the wrapper registered (ENGINE_MGL_SUITE_STATS), so the harness
    knows the tracked run really went through the tracking."""
    device = _shared.pop("device", None)
    if device is None:
        return
    made = device.tracker.mark()  # serials are handed out one per tracked object
    device.shutdown()
    path = os.environ.get("ENGINE_MGL_SUITE_STATS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"tracked_objects": made}, out)
