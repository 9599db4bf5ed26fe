"""GL_OUT_OF_MEMORY: a clean typed error, nothing ledgered or leaked, the context still draws.

llvmpipe refuses single resources of about 2 GiB or more (measured: 4 GiB of RGBA32F storage
fails with GL_OUT_OF_MEMORY; docs/benchmarks.md, "Driver behaviour")."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import GLOutOfMemoryError

VS = """#version 330
in vec2 pos; void main() { gl_Position = vec4(pos, 0.0, 1.0); }"""
FS = """#version 330
out vec4 color; void main() { color = vec4(1.0, 0.5, 0.25, 1.0); }"""


def test_oom_is_clean_and_context_survives(device):
    if "llvmpipe" not in device.caps.renderer:
        pytest.skip("the 4 GiB refusal is a llvmpipe fact; real GPUs may accept it")
    before_total = device.ledger.total
    before_live = len(device.live_objects())
    with pytest.raises(GLOutOfMemoryError) as info:
        device.storage_texture("RGBA32F", 16384, 16384, label="too-big")
    assert info.value.nbytes == 16384 * 16384 * 16
    assert "too-big" in str(info.value)
    assert device.ledger.total == before_total
    assert len(device.live_objects()) == before_live
    # a draw right after works
    color = device.texture((8, 8), label="after-oom")
    fbo = device.framebuffer([color], label="after-oom-fbo")
    prog = device.program(vertex_shader=VS, fragment_shader=FS, label="after-oom-prog")
    vbo = device.buffer(np.array([-1, -1, 3, -1, -1, 3], "f4").tobytes(), label="tri")
    vao = device.vertex_array(prog, [(vbo, "2f", "pos")], label="tri-vao")
    fbo.use()
    fbo.clear()
    vao.render()
    pixels = np.frombuffer(fbo.read(components=4), np.uint8).reshape(8, 8, 4)
    assert (pixels[..., 0] == 255).all() and (abs(pixels[..., 1].astype(int) - 128) <= 1).all()
    for obj in (vao, vbo, prog, fbo, color):
        device.release(obj)
