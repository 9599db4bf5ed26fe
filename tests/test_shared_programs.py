"""Programs are compiled once per device (and current context) and kept until shutdown: a
second renderer on a device reuses the first one's programs, no leak check counts them, and
shutdown leaves nothing behind."""
from __future__ import annotations

from vt_helpers import headless_device

from engine.gl.hosts import made_current
from engine.render.renderer import Renderer
from engine.streaming.static import StaticTextureProvider

VS = "#version 330\nvoid main() { gl_Position = vec4(0.0, 0.0, 0.0, 1.0); }"
FS = "#version 330\nout vec4 c;\nvoid main() { c = vec4(1.0); }"


def _programs(device) -> set[int]:
    return {rec.glo for rec in device.live_objects() if rec.type == "program"}


def test_a_second_renderer_reuses_the_first_ones_programs():
    device = headless_device()
    try:
        with made_current(device), device.leak_check():
            provider = StaticTextureProvider(device)
            first = Renderer(device, provider, (32, 32))
            made = _programs(device)
            first.release()
            assert _programs(device) == made  # kept: the device's, not the renderer's
            second = Renderer(device, provider, (48, 32))
            assert _programs(device) == made  # nothing compiled again
            second.release()
            provider.release()
        assert made
    finally:
        assert device.shutdown() == []


def test_the_same_sources_give_the_same_program_per_context():
    a, b = headless_device(), headless_device()
    try:
        with made_current(a):
            one = a.shared_program(vertex_shader=VS, fragment_shader=FS, label="one")
            assert a.shared_program(vertex_shader=VS, fragment_shader=FS, label="again") is one
        with made_current(b):  # a's calls landing in b's context get a program of b's
            other = a.shared_program(vertex_shader=VS, fragment_shader=FS, label="other")
        assert other is not one
    finally:
        with made_current(b):
            assert b.shutdown() == []
        with made_current(a):
            assert a.shutdown() == []  # the one made under b is forgotten, not deleted here
