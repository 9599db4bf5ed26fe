"""The shared readback ring (engine/gl/readback.py): copies never wait, a full ring refuses
a copy instead of stalling, the newest finished copy wins, and nothing leaks."""
from __future__ import annotations

import numpy as np

from engine.gl.readback import ReadbackRing
from engine.memory.ledger import Category


def test_newest_copy_wins_and_a_full_ring_refuses(dev):
    with dev.leak_check():
        tex = dev.texture((4, 2), 1, dtype="u4", category=Category.TARGET, label="rb.color")
        fbo = dev.framebuffer([tex], label="rb.fbo")
        ring = ReadbackRing(dev, 2, "rb")
        try:
            for frame, value in ((1, 7), (2, 9)):
                tex.write(np.full(8, value, np.uint32).tobytes())
                assert ring.start(fbo, (4, 2), 1, frame, tag=value)
            assert not ring.has_free()
            assert not ring.start(fbo, (4, 2), 1, 3)  # refused, nothing waited for
            dev.finish()
            got = ring.poll()
            assert got is not None and got.frame == 2 and got.tag == 9
            assert got.image.shape == (2, 4) and (got.image == 9).all()
            assert ring.in_flight() == 0 and ring.poll() is None
        finally:
            ring.release()
            dev.release(fbo)
            dev.release(tex)
