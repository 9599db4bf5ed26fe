"""The mip-debug view's legend on the HUD (issue 15: "the mip-debug view has no legend")."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from engine.diagnostics.hud import MIP_DEBUG_LEGEND, Hud

ROOT = Path(__file__).resolve().parents[1]
STATS = {"frame": 3, "ms": 9.0, "total_bytes": 100 << 20, "budget_bytes": 256 << 20,
         "by_category": {"texture.streamed": 80 << 20, "target": 20 << 20},
         "render_scale": 1.0, "texture_resident_bytes": 80 << 20,
         "texture_wanted_bytes": 90 << 20, "pending_uploads": 0}


def test_legend_colours_are_the_shaders_colours():
    src = (ROOT / "shaders" / "mipdebug.glsl").read_text()
    body = src[src.index("vec3 mip_debug_color"):]
    body = body[:body.index("float luma")]
    shader = [tuple(float(v) for v in m.groups())
              for m in re.finditer(r"vec3\(([\d.]+),\s*([\d.]+),\s*([\d.]+)\)", body)]
    assert shader == [rgb for _, rgb in MIP_DEBUG_LEGEND[:3]]
    forward = (ROOT / "shaders" / "forward.frag.glsl").read_text()
    assert ": vec4(vec3(0.3), 1.0)" in forward  # texture-less surfaces in the mip view
    assert MIP_DEBUG_LEGEND[3][1] == (0.3, 0.3, 0.3)


def _glyphs(text: str) -> int:
    return sum(1 for c in text if c != " ")


def test_layout_adds_the_legend_only_in_the_mip_view(device):
    hud = Hud(device)
    try:
        still = {k: v for k, v in STATS.items() if k != "ms"}  # no new frame-time bar
        lit = hud.layout((640, 360), still)
        mip = hud.layout((640, 360), still, view_mode="mip")
        via_record = hud.layout((640, 360), {**still, "view_mode": "mip"})
        expected = _glyphs("mip view") + sum(1 + _glyphs(label) for label, _ in MIP_DEBUG_LEGEND)
        assert len(mip.quads) - len(lit.quads) == expected
        assert len(via_record.quads) == len(mip.quads)
        # The panel background (first quad) grows to hold the legend.
        assert mip.quads[0][3] > lit.quads[0][3]
        swatches = {q[8:11] for q in mip.quads} - {q[8:11] for q in lit.quads}
        assert {rgb for _, rgb in MIP_DEBUG_LEGEND} <= swatches
    finally:
        hud.release()


def test_legend_is_drawn_in_the_framebuffer(device):
    hud = Hud(device)
    tex = device.texture((480, 320), 4, category="target", label="legend-test")
    fbo = device.framebuffer([tex], label="legend-test.fbo")
    try:
        def shot(mode: str | None) -> np.ndarray:
            fbo.clear(0.0, 0.0, 0.0, 1.0)
            hud.draw(fbo, (480, 320), STATS, view_mode=mode)
            return np.frombuffer(fbo.read(components=3), np.uint8).reshape(320, 480, 3)

        def has(img: np.ndarray, rgb) -> bool:
            want = np.rint(np.array(rgb) * 255).astype(int)
            return bool((np.abs(img.astype(int) - want).max(axis=-1) <= 1).sum() >= 50)

        lit, mip = shot(None), shot("mip")
        for _, rgb in MIP_DEBUG_LEGEND[:3]:
            assert has(mip, rgb) and not has(lit, rgb), rgb
    finally:
        device.release(fbo)
        device.release(tex)
        hud.release()


def test_layout_shows_the_nvml_note_within_the_panel(device):
    """NVML's one-line view (or why there is none) is drawn, cut to the panel's width."""
    hud = Hud(device)
    try:
        still = {k: v for k, v in STATS.items() if k != "ms"}
        plain = hud.layout((640, 360), still)
        note = "NVML: libnvidia-ml.so.1 not found " * 5
        noted = hud.layout((640, 360), {**still, "vram_note": note})
        assert len(noted.quads) > len(plain.quads)
        panel = noted.quads[0]
        assert all(q[2] <= panel[2] + 1e-6 for q in noted.quads)  # inside the panel
        assert noted.quads[0][3] > plain.quads[0][3]  # the panel grew by the line
    finally:
        hud.release()


def test_layout_shows_the_detail_fractions_and_the_cut_time(device):
    """The wall's per-frame metrics (screen-weighted detail at / below wanted, the time since
    the last cut) get a HUD line when the record carries them."""
    hud = Hud(device)
    try:
        still = {k: v for k, v in STATS.items() if k != "ms"}
        plain = hud.layout((640, 360), still)
        metrics = {"at_wanted_fraction": 0.9, "coarser_1_fraction": 0.08,
                   "coarser_2plus_fraction": 0.02, "since_cut_s": 0.12}
        shown = hud.layout((640, 360), {**still, **metrics})
        expected = _glyphs("detail 90%  -1: 8%  -2+: 2%   cut +0.12 s")
        assert len(shown.quads) - len(plain.quads) == expected
    finally:
        hud.release()
