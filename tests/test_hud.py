"""HUD: font atlas, layout (pure), and drawing over a framebuffer without leaks."""
from __future__ import annotations

import numpy as np

from engine.diagnostics.hud import HISTORY, Hud, build_font_atlas

STATS = {"frame": 7, "ms": 12.5, "total_bytes": 300 << 20, "budget_bytes": 256 << 20,
         "by_category": {"texture.streamed": 200 << 20, "target": 90 << 20, "other": 10 << 20},
         "render_scale": 0.75, "texture_resident_bytes": 200 << 20,
         "texture_wanted_bytes": 260 << 20, "pending_uploads": 3}


def test_font_atlas_has_glyphs_and_a_solid_cell():
    atlas = build_font_atlas()
    assert atlas.pixels.dtype == np.uint8 and atlas.pixels.max() == 255
    assert atlas.advances["M"] > atlas.advances["i"] > 0
    h, w = atlas.pixels.shape
    u, v = atlas.solid_uv
    assert atlas.pixels[int(v * h), int(u * w)] == 255


def test_draw_over_framebuffer(device):
    hud = Hud(device)
    tex = device.texture((320, 240), 4, category="target", label="hud-test")
    fbo = device.framebuffer([tex], label="hud-test.fbo")
    try:
        for i in range(HISTORY + 5):  # history keeps only the last HISTORY frame times
            hud.layout((320, 240), {**STATS, "ms": float(i)})
        assert len(hud.frame_ms) == HISTORY
        fbo.clear(0.0, 0.0, 0.0, 1.0)
        hud.draw(fbo, (320, 240), STATS)
        img = np.frombuffer(fbo.read(components=3), np.uint8).reshape(240, 320, 3)[::-1]
        panel, outside = img[8:100, 8:300], img[200:, :]
        assert panel.max() > 200  # text and bars drawn
        assert outside.max() == 0  # nothing outside the panel
        # Over budget: the usage line is drawn in the budget colour (red dominates somewhere).
        red = (panel[..., 0].astype(int) - panel[..., 1]) > 100
        assert red.any()
    finally:
        device.release(fbo)
        device.release(tex)
        hud.release()


def test_a_caption_is_drawn_above_the_numbers(device):
    """A scene's `caption` (the viewer's file in view) is the panel's first line, its start
    cut (with "...") when too wide: the end of a file name is what tells files apart."""
    hud = Hud(device)
    try:
        plain = len(hud.layout((320, 240), STATS).quads)
        named = hud.layout((320, 240), {**STATS, "caption": "IMG_0042.jpg (3/40)"}).quads
        assert len(named) >= plain + len("IMG_0042.jpg(3/40)")
        wide = hud.layout((200, 240), {**STATS, "caption": "x" * 300 + "END.jpg"}).quads
        assert len(wide) < plain + 300
    finally:
        hud.release()
