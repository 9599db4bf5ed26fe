"""The on-screen HUD, drawn by the engine itself over the output image.

What it shows is what a user needs to judge the budget at a glance: the budget and the
bytes in use by ledger category (a stacked bar against the budget mark), texture bytes
resident versus wanted (how much detail the budget is costing) and by priority tier (visible,
prefetch, recent), the free room (under the budget, in the streaming pool, page-cache slots),
render scale, pending uploads, and the last 120 frame times. In the mip-debug view it adds the view's legend (what
green, yellow, red and grey mean), since a colour code nobody can read is no diagnostic.
A frame record's `caption` (the viewer's file in view) is its first line.

Why its own tiny text renderer: the engine has no UI toolkit, and the HUD must work in
every context (headless CI screenshots included). Pillow's built-in font is rasterised
once into an R8 glyph atlas; every frame becomes one batch of textured quads (glyphs, and
shapes that sample a solid texel of the same atlas) in one dynamic buffer and one draw call.
All GL objects come from the device, so the HUD's own bytes show up in the ledger it draws.
"""
from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..gl.constants import NEAREST
from ..gl.device import Device
from ..memory.sizes import format_bytes
from .timeline import BUDGET_COLOR, TIER_COLORS, TIERS, categories_of, category_color

log = logging.getLogger(__name__)

HISTORY = 120
MAX_QUADS = 2048
_FLOATS_PER_VERTEX = 8  # x, y, u, v, r, g, b, a
_FIRST, _LAST = 32, 126  # printable ASCII
_PANEL_BG = (0.05, 0.06, 0.08, 0.72)
_WHITE = (0.95, 0.95, 0.95, 1.0)
_DIM = (0.65, 0.68, 0.72, 1.0)

Color = tuple[float, float, float, float]

# The mip-debug view's colours, as shaders/mipdebug.glsl (and forward.frag.glsl for texture-
# less surfaces) paint them; tests/test_hud_legend.py holds the two in step. The shader
# darkens each by the texel's luminance (to 45%), so the view shows shades of these.
MIP_DEBUG_LEGEND: tuple[tuple[str, tuple[float, float, float]], ...] = (
    ("wanted level resident", (0.1, 0.85, 0.2)),
    ("1 level coarser", (0.95, 0.85, 0.1)),
    ("2+ levels missing", (0.95, 0.15, 0.1)),
    ("untextured", (0.3, 0.3, 0.3)),
)


@dataclass(frozen=True)
class FontAtlas:
    """Glyph coverage in a grid of equal cells, plus each glyph's advance in pixels."""

    pixels: np.ndarray  # (H, W) uint8
    cell: tuple[int, int]  # (w, h)
    columns: int
    advances: dict[str, int]
    solid_uv: tuple[float, float]  # a texel that is fully covered: shapes sample it

    @property
    def line_height(self) -> int:
        return self.cell[1]


def build_font_atlas() -> FontAtlas:
    """Rasterise Pillow's default font (no font files needed) into a glyph grid."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    chars = [chr(c) for c in range(_FIRST, _LAST + 1)]
    ascent, descent = font.getmetrics() if hasattr(font, "getmetrics") else (11, 2)
    cw = max(int(np.ceil(font.getlength(c))) for c in chars) + 1
    ch = ascent + descent + 1
    columns = 16
    rows = (len(chars) + 1 + columns - 1) // columns  # +1: the solid cell
    im = Image.new("L", (columns * cw, rows * ch), 0)
    draw = ImageDraw.Draw(im)
    for i, c in enumerate(chars):
        draw.text(((i % columns) * cw, (i // columns) * ch), c, fill=255, font=font)
    solid = len(chars)
    sx, sy = (solid % columns) * cw, (solid // columns) * ch
    draw.rectangle([sx, sy, sx + cw - 1, sy + ch - 1], fill=255)
    pixels = np.asarray(im, np.uint8).copy()
    advances = {c: int(round(font.getlength(c))) for c in chars}
    advances[" "] = max(advances[" "], cw // 2)  # the default font's space reads as no gap
    return FontAtlas(pixels, (cw, ch), columns, advances,
                     ((sx + cw / 2) / im.width, (sy + ch / 2) / im.height))


class _Batch:
    """CPU-side quads of one frame, in pixels."""

    def __init__(self, atlas: FontAtlas) -> None:
        self.atlas = atlas
        self.quads: list[tuple[float, ...]] = []

    def rect(self, x: float, y: float, w: float, h: float, color: Color) -> None:
        u, v = self.atlas.solid_uv
        self.quads.append((x, y, x + w, y + h, u, v, u, v, *color))

    def text(self, x: float, y: float, s: str, color: Color = _WHITE) -> float:
        """Draw `s` with its top-left at (x, y); returns the x after it."""
        a = self.atlas
        cw, ch = a.cell
        H, W = a.pixels.shape
        for c in s:
            if c not in a.advances:
                c = "?"
            i = ord(c) - _FIRST
            if c != " ":
                gx, gy = (i % a.columns) * cw, (i // a.columns) * ch
                self.quads.append((x, y, x + cw, y + ch, gx / W, gy / H, (gx + cw) / W,
                                   (gy + ch) / H, *color))
            x += a.advances[c]
        return x

    def text_width(self, s: str) -> int:
        return sum(self.atlas.advances.get(c, self.atlas.advances["?"]) for c in s)

    def vertices(self) -> np.ndarray:
        """Two triangles per quad: (6 * n, 8) float32."""
        if not self.quads:
            return np.zeros((0, _FLOATS_PER_VERTEX), np.float32)
        q = np.array(self.quads[:MAX_QUADS], np.float32)
        x0, y0, x1, y1, u0, v0, u1, v1 = (q[:, i] for i in range(8))
        col = q[:, 8:12]
        corners = [(x0, y0, u0, v0), (x1, y0, u1, v0), (x1, y1, u1, v1),
                   (x0, y0, u0, v0), (x1, y1, u1, v1), (x0, y1, u0, v1)]
        verts = np.stack([np.column_stack([*c, col]) for c in corners], axis=1)
        return verts.reshape(-1, _FLOATS_PER_VERTEX)


def _rgba(rgb: tuple[int, int, int], a: float = 1.0) -> Color:
    return (rgb[0] / 255, rgb[1] / 255, rgb[2] / 255, a)


class Hud:
    """`Hud(device)`; each frame `draw(fbo, size, stats)` with the frame loop's record
    (frame, ms, total_bytes, budget_bytes, by_category, render_scale,
    texture_resident_bytes, texture_wanted_bytes, pending_uploads); `release()` at the end."""

    def __init__(self, device: Device) -> None:
        from ..gl import shaders

        self.device = device
        self.atlas = build_font_atlas()
        self.frame_ms: deque[float] = deque(maxlen=HISTORY)
        self._made: list[Any] = []
        try:
            h, w = self.atlas.pixels.shape
            self.font = self._keep(device.texture((w, h), 1, self.atlas.pixels.tobytes(),
                                                  category="other", label="hud.font"))
            self.font.filter = (NEAREST, NEAREST)  # glyph texels, never blurred
            self.program = device.shared_program(
                vertex_shader=shaders.load("hud.vert.glsl"),
                fragment_shader=shaders.load("hud.frag.glsl"), label="hud")
            self.vbo = self._keep(device.buffer(
                reserve=MAX_QUADS * 6 * _FLOATS_PER_VERTEX * 4, dynamic=True,
                category="other", label="hud.vbo"))
            self.vao = self._keep(device.vertex_array(
                self.program, [(self.vbo, "2f 2f 4f", "in_pos", "in_uv", "in_color")],
                label="hud.vao"))
        except BaseException:
            self.release()
            raise

    def _keep(self, obj: Any) -> Any:
        self._made.append(obj)
        return obj

    # ------------------------------------------------------------------ layout
    def layout(self, size: tuple[int, int], stats: Mapping[str, Any],
               view_mode: str | None = None) -> _Batch:
        """The frame's quads (pure CPU: tested without GL). `view_mode` (or the record's
        "view_mode") "mip" adds the mip-debug legend."""
        if "ms" in stats:
            self.frame_ms.append(float(stats["ms"]))
        # the frame's CPU time without the GPU wait and its GPU time (timer queries, a few
        # frames old), when the frame loop records them (Renderer.frame_stats)
        self._cpu_gpu = (stats.get("cpu_ms"), stats.get("gpu_ms"))
        b = _Batch(self.atlas)
        lh = self.atlas.line_height
        pad = 6
        width = max(120, min(340, size[0] - 2 * pad))
        x0, y = pad + pad, pad + pad
        inner = width - 2 * pad
        budget = int(stats.get("budget_bytes", 0))
        total = int(stats.get("total_bytes", 0))
        by_cat = {c: int(v) for c, v in stats.get("by_category", {}).items() if v}
        bg_at = len(b.quads)
        b.rect(pad, pad, width, 0, _PANEL_BG)  # height fixed below, once the layout is known
        caption = str(stats.get("caption") or "")
        if caption:  # what the scene shows (the viewer: the file open), above the numbers
            while b.text_width(caption) > inner and len(caption) > 4:
                caption = "..." + caption[4:]
            b.text(x0, y, caption, _WHITE)
            y += lh + 2

        over = budget and total > budget
        b.text(x0, y, f"{format_bytes(total)} / {format_bytes(budget)}",
               _rgba(BUDGET_COLOR) if over else _WHITE)
        pct = f"{100 * total / budget:.0f}%" if budget else "no budget"
        b.text(x0 + inner - b.text_width(pct), y, pct, _DIM)
        y += lh + 2
        reason = stats.get("over_budget_reason")
        if reason or stats.get("over_budget"):  # loud: what went over, and why
            text = f"OVER BUDGET: {reason or 'minimum allocations exceed it'}"
            while text and b.text_width(text) > inner - b.text_width("M"):
                text = text[:-4] + "..."
            b.text(x0, y, text, _rgba(BUDGET_COLOR))
            y += lh + 2
        y = self._budget_bar(b, x0, y, inner, budget, total, by_cat)
        y = self._legend(b, x0, y, inner, by_cat, lh)
        resident = int(stats.get("texture_resident_bytes", 0))
        wanted = int(stats.get("texture_wanted_bytes", 0))
        b.text(x0, y, f"tex {format_bytes(resident)} of {format_bytes(wanted)} wanted", _DIM)
        y += lh
        full = max(resident, wanted, 1)
        b.rect(x0, y, inner, 5, (1, 1, 1, 0.15))
        b.rect(x0, y, inner * wanted / full, 5, (0.9, 0.9, 0.9, 0.35))
        b.rect(x0, y, inner * resident / full, 5, _rgba(category_color("texture.streamed")))
        y += 9
        y = self._tiers_and_free(b, x0, y, inner, stats, budget, total, resident, lh)
        scale = float(stats.get("render_scale", 1.0))
        b.text(x0, y, f"scale {scale:.2f}   uploads {int(stats.get('pending_uploads', 0))}"
                      f"   frame {int(stats.get('frame', 0))}", _WHITE)
        y += lh + 2
        if "at_wanted_fraction" in stats:  # screen-weighted detail (the wall's metrics)
            line = (f"detail {100 * float(stats['at_wanted_fraction']):.0f}%  "
                    f"-1: {100 * float(stats.get('coarser_1_fraction', 0)):.0f}%  "
                    f"-2+: {100 * float(stats.get('coarser_2plus_fraction', 0)):.0f}%")
            if stats.get("since_cut_s") is not None:
                line += f"   cut +{float(stats['since_cut_s']):.2f} s"
            elif stats.get("cut_to_95_s") is not None:
                line += f"   cut->95% {float(stats['cut_to_95_s']):.2f} s"
            b.text(x0, y, line, _WHITE)
            y += lh + 2
        note = str(stats.get("vram_note") or "")
        if note:  # NVML's view: the GPU's free memory and the other processes holding it
            while note and b.text_width(note) > inner - b.text_width("M"):
                note = note[:-4] + "..."
            b.text(x0, y, note, _DIM)
            y += lh + 2
        y = self._graph(b, x0, y, inner, lh)
        if (view_mode or stats.get("view_mode")) == "mip":
            y = self._mip_legend(b, x0, y + 6, inner, lh)
        x, yy, _, _, *rest = b.quads[bg_at]
        b.quads[bg_at] = (x, yy, x + width, y + pad, *rest)
        return b

    def _tiers_and_free(self, b: _Batch, x0: float, y: float, w: float,
                        stats: Mapping[str, Any], budget: int, total: int, resident: int,
                        lh: int) -> float:
        """Resident texture bytes by priority tier (a stacked bar and its figures) and the
        free room: under the budget, in the streaming pool, in the page cache's slots."""
        tiers = {k: int(v) for k, v in (stats.get("resident_by_tier") or {}).items() if v}
        if tiers:
            full = max(sum(tiers.values()), 1)
            cx = x0
            for tier in TIERS:
                if tier in tiers:
                    seg = w * tiers[tier] / full
                    b.rect(cx, y, seg, 5, _rgba(TIER_COLORS[tier]))
                    cx += seg
            y += 7
            b.text(x0, y, "  ".join(f"{t[:3]} {format_bytes(tiers[t])}" for t in TIERS
                                    if t in tiers), _DIM)
            y += lh
        effective = int(stats.get("effective_budget_bytes", budget))
        free = [f"budget {format_bytes(max(effective - total, 0))}"]
        if "pool_bytes" in stats:
            free.append(f"pool {format_bytes(max(int(stats['pool_bytes']) - resident, 0))}")
        slots = int(stats.get("cache_slots", 0))
        if slots:
            free.append(f"cache {slots - int(stats.get('cache_slots_used', 0))}/{slots} slots")
        b.text(x0, y, "free " + "  ".join(free), _DIM)
        return y + lh + 2

    def _budget_bar(self, b: _Batch, x: float, y: float, w: float, budget: int, total: int,
                    by_cat: dict[str, int]) -> float:
        """Stacked bytes per category; the bar spans max(budget, total) so overshoot shows."""
        full = max(budget, total, 1)
        b.rect(x, y, w, 10, (1, 1, 1, 0.12))
        cx = x
        for i, cat in enumerate(categories_of([{"by_category": by_cat}])):
            seg = w * by_cat[cat] / full
            b.rect(cx, y, seg, 10, _rgba(category_color(cat, i)))
            cx += seg
        if budget:
            bx = x + w * budget / full
            b.rect(bx - 1, y - 2, 2, 14, _rgba(BUDGET_COLOR))
        return y + 14

    def _legend(self, b: _Batch, x0: float, y: float, w: float, by_cat: dict[str, int],
                lh: int) -> float:
        x = x0
        for i, cat in enumerate(categories_of([{"by_category": by_cat}])):
            label = f"{cat.replace('texture.', 'tex.')} {format_bytes(by_cat[cat])}"
            need = 10 + b.text_width(label) + 8
            if x > x0 and x + need > x0 + w:
                x, y = x0, y + lh
            b.rect(x, y + lh / 2 - 3, 6, 6, _rgba(category_color(cat, i)))
            x = b.text(x + 9, y, label, _DIM) + 8
        return y + lh + 2

    def _mip_legend(self, b: _Batch, x0: float, y: float, w: float, lh: int) -> float:
        """'mip view' and one swatch per colour of the mip-debug view, wrapped to the panel."""
        b.text(x0, y, "mip view", _WHITE)
        y += lh
        x = x0
        for label, rgb in MIP_DEBUG_LEGEND:
            need = 14 + b.text_width(label) + 10
            if x > x0 and x + need > x0 + w:
                x, y = x0, y + lh
            b.rect(x, y + lh / 2 - 5, 10, 10, (*rgb, 1.0))
            x = b.text(x + 14, y, label, _DIM) + 10
        return y + lh

    def _graph(self, b: _Batch, x: float, y: float, w: float, lh: int) -> float:
        """Frame times, newest at the right; a line marks 16.7 ms (60 Hz)."""
        h = 36
        b.rect(x, y, w, h, (1, 1, 1, 0.08))
        ms = list(self.frame_ms)
        top = max(max(ms, default=1.0), 16.7) * 1.1
        bw = w / HISTORY
        for i, v in enumerate(ms):
            bh = h * min(v, top) / top
            color = (0.35, 0.8, 0.4, 0.9) if v <= 16.7 else (0.95, 0.45, 0.3, 0.9)
            b.rect(x + w - (len(ms) - i) * bw, y + h - bh, max(bw - 0.2, 0.5), bh, color)
        b.rect(x, y + h - h * 16.7 / top, w, 1, (1, 1, 1, 0.4))
        last = f"{ms[-1]:.1f} ms" if ms else "-"
        b.text(x + 2, y + 1, last, _WHITE)
        cpu, gpu = getattr(self, "_cpu_gpu", (None, None))
        if cpu is not None or gpu is not None:
            split = "   ".join(f"{name} {v:.1f}" for name, v in (("cpu", cpu), ("gpu", gpu))
                               if v is not None)
            b.text(x + w - b.text_width(split) - 2, y + 1, split, _WHITE)
        return y + h

    # ------------------------------------------------------------------ GL
    def draw(self, fbo: Any, size: tuple[int, int],
             stats: Mapping[str, Any], view_mode: str | None = None) -> None:
        """Blend the HUD over the framebuffer `fbo` (whose size is `size`); `view_mode` as
        for `layout`. The pass sets its own state through the device (alpha over, no depth
        test, no culling) and leaves everything off, as every pass does."""
        verts = self.layout(size, stats, view_mode).vertices()
        if not len(verts):
            return
        fbo.use()
        self.device.set_viewport((0, 0, int(size[0]), int(size[1])))
        self.vbo.write(verts.tobytes())
        self.program["u_size"].value = (float(size[0]), float(size[1]))
        self.program["u_font"].value = 0
        self.font.use(0)
        self.device.set_state(blend=True)
        self.vao.render(vertices=len(verts))  # triangles, the default mode
        self.device.set_state()

    def release(self) -> None:
        for obj in reversed(self._made):
            self.device.release(obj)
        self._made.clear()
