"""The timeline picture of a run report: what memory did against the budget, frame by frame.

Top panel: ledger bytes by category as stacked areas, the budget as a line and the render
scale on a secondary axis, so a reader sees at a glance whether textures or render targets
gave way when the budget moved. Bottom panel: frame times. Drawn with Pillow by default (the
engine must not need matplotlib, and Pillow output is identical on every machine); pass
backend="matplotlib" for matplotlib's rendering when it is installed.

Every series is drawn inside its axes: the memory axis always reaches above the highest
budget (a budget far above what the run used flattens the areas, and the panel then says
what share of the budget the peak was, rather than cutting the budget line off), and the
render-scale axis has headroom above the highest scale, so a scale of 1.0 is not hidden in
the frame's border. Frame times that are NaN or infinite are skipped and counted on the
picture. The picture carries a PNG text chunk marking it as a timeline: `engine report`
overwrites only files that have it (or any with --force), never a screenshot that happens to
share the name, and its default output is RUN.timeline.png, not RUN.png.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import OutputExistsError, UsageError
from ..memory.ledger import CATEGORIES
from ..memory.sizes import format_bytes
from .report import validate_report

log = logging.getLogger(__name__)

RGB = tuple[int, int, int]
CATEGORY_COLORS: dict[str, RGB] = {
    "texture.streamed": (76, 145, 224), "texture.static": (64, 190, 170),
    "target": (236, 154, 60), "buffer": (170, 120, 220), "staging": (230, 200, 70),
    "other": (150, 150, 150), "user": (220, 100, 140)}
_EXTRA_COLORS: Sequence[RGB] = ((120, 200, 90), (200, 90, 90), (90, 200, 220), (210, 170, 140))
BUDGET_COLOR: RGB = (230, 60, 60)
#: The streamer's priority tiers, most important first, and their colours (the HUD's too).
TIERS = ("visible", "prefetch", "recent", "none")
TIER_COLORS: dict[str, RGB] = {"visible": (70, 170, 90), "prefetch": (120, 160, 230),
                               "recent": (200, 170, 90), "none": (190, 190, 190)}
SCALE_COLOR: RGB = (40, 40, 40)
_BG, _AXIS, _GRID, _TEXT = (255, 255, 255), (60, 60, 60), (228, 228, 228), (30, 30, 30)
MAX_SIZE = (8192, 8192)  # a picture larger than this is a typo, not a wish (256 MiB of RGB)
MIN_SIZE = (320, 240)  # below this the labels no longer fit
TIMELINE_MARK = ("engine.timeline", "1")  # PNG text chunk: "this file is a timeline"


def category_color(category: str, index: int = 0) -> RGB:
    """A stable colour per ledger category (the HUD uses the same ones)."""
    return CATEGORY_COLORS.get(category, _EXTRA_COLORS[index % len(_EXTRA_COLORS)])


def categories_of(frames: Sequence[dict[str, Any]]) -> list[str]:
    """Categories present in the run, in the ledger's order, unknown ones after."""
    seen = {c for f in frames for c, b in f["by_category"].items() if b}
    return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))


def _series(report: dict[str, Any]) -> dict[str, np.ndarray]:
    frames = report["frames"]
    out = {"frame": np.array([f["frame"] for f in frames], float),
           "ms": np.array([f["ms"] for f in frames], float),
           # The budget the engine really worked under: the governor's effective budget
           # (lowered when other programs take VRAM) where the report has it.
           "budget": np.array([f.get("effective_budget_bytes", f["budget_bytes"])
                               for f in frames], float),
           "scale": np.array([f["render_scale"] for f in frames], float)}
    for cat in categories_of(frames):
        out["cat:" + cat] = np.array([f["by_category"].get(cat, 0) for f in frames], float)
    # resident texture bytes by priority tier, where the frames have them (reports written
    # before tiers existed, and providers without tiers, have none)
    for tier in TIERS:
        values = np.array([(f.get("resident_by_tier") or {}).get(tier, 0) for f in frames],
                          float)
        if values.any():
            out["tier:" + tier] = values
    return out


def memory_axis_max(memory_max: float, budget: np.ndarray) -> float:
    """Top of the memory axis: above both the memory peak and the highest budget, with
    8% headroom so the budget line (3 px wide) is drawn whole inside the panel."""
    finite = budget[np.isfinite(budget)]
    top = max(memory_max, float(finite.max()) if finite.size else 0.0, 1.0)
    return top * 1.08


def scale_axis_max(scale: np.ndarray) -> float:
    """Top of the render-scale axis: at least 1.0 (the usual maximum) plus 10% headroom, so
    a run at full scale draws its line inside the panel, not on its border."""
    finite = scale[np.isfinite(scale)]
    return max(1.0, float(finite.max()) if finite.size else 1.0) * 1.1


def parse_size(text: str) -> tuple[int, int]:
    """'WIDTHxHEIGHT' -> (w, h), each within MIN_SIZE..MAX_SIZE; UsageError otherwise.
    Checked before any pixel is allocated (99999x99999 once allocated until the kernel
    killed it)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {text!r}: expected WIDTHxHEIGHT, e.g. 1200x720") from None
    check_size((w, h))
    return w, h


def check_size(size: tuple[int, int]) -> None:
    """UsageError unless MIN_SIZE <= size <= MAX_SIZE (both sides)."""
    w, h = size
    if not (MIN_SIZE[0] <= w <= MAX_SIZE[0] and MIN_SIZE[1] <= h <= MAX_SIZE[1]):
        raise UsageError(f"--size {w}x{h}: width must be {MIN_SIZE[0]}-{MAX_SIZE[0]} and "
                         f"height {MIN_SIZE[1]}-{MAX_SIZE[1]} pixels")


def is_timeline_png(path: Path | str) -> bool:
    """Whether `path` is a picture this module wrote (it carries TIMELINE_MARK)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            text = getattr(im, "text", None) or im.info
            return text.get(TIMELINE_MARK[0]) == TIMELINE_MARK[1]
    except (OSError, ValueError, SyntaxError):
        return False


def default_output(report_path: Path | str) -> Path:
    """RUN.json -> RUN.timeline.png: never RUN.png, where a run's screenshot goes."""
    p = Path(report_path)
    return p.with_name(p.stem + ".timeline.png")


def render_timeline(report: dict[str, Any], out_png: Path | str, *,
                    size: tuple[int, int] = (1200, 720),
                    backend: Literal["pillow", "matplotlib"] = "pillow",
                    force: bool = False) -> Path:
    """Draw the report's timeline into `out_png` and return its path.

    Raises UsageError for a size outside MIN_SIZE..MAX_SIZE (before allocating anything) and
    OutputExistsError when `out_png` exists and is not a timeline, unless `force`."""
    check_size(size)
    validate_report(report)
    out = Path(out_png)
    if out.exists() and not force and not is_timeline_png(out):
        raise OutputExistsError(out, "exists and is not a timeline picture; not overwriting "
                                     "it (choose another -o, or pass --force)")
    if not report["frames"]:
        raise ValueError("the report has no frames to draw")
    out.parent.mkdir(parents=True, exist_ok=True)
    if backend == "matplotlib":
        _matplotlib(report, out, size)
    else:
        _Pillow(report, size).save(out)
    log.info("timeline of %d frames -> %s", len(report["frames"]), out)
    return out


# ---------------------------------------------------------------------------- Pillow
def _nice_step(span: float, ticks: int) -> float:
    raw = max(span, 1e-12) / ticks
    mag = 10 ** np.floor(np.log10(raw))
    return float(next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw))


def _byte_step(span: float, ticks: int) -> float:
    """Tick step in powers of two of KiB/MiB/GiB times 1, 2 or 5, so labels read cleanly."""
    unit = 1024 ** max(0, min(3, int(np.log(max(span, 1)) / np.log(1024))))
    return _nice_step(span / unit, ticks) * unit


class _Pillow:
    """Two panels on one canvas; data -> pixel mapping per panel."""

    def __init__(self, report: dict[str, Any], size: tuple[int, int]) -> None:
        from PIL import Image, ImageDraw, ImageFont

        self.w, self.h = size
        self.im = Image.new("RGB", size, _BG)
        self.d = ImageDraw.Draw(self.im)
        self.font = ImageFont.load_default(size=13)
        self.small = ImageFont.load_default(size=11)
        self.s = _series(report)
        self.summary = report["summary"]
        self.left, self.right = 90, self.w - 80
        x = self.s["frame"]
        self.x0, self.x1 = float(x.min()), float(max(x.max(), x.min() + 1))
        self._draw()

    def px(self, frame: np.ndarray | float) -> np.ndarray:
        return self.left + (np.asarray(frame) - self.x0) / (self.x1 - self.x0) * (
            self.right - self.left)

    def _frame_axis(self, top: int, bottom: int) -> None:
        step = max(1.0, _nice_step(self.x1 - self.x0, 8))
        for v in np.arange(np.ceil(self.x0 / step) * step, self.x1 + 1e-9, step):
            x = float(self.px(v))
            self.d.line([(x, top), (x, bottom)], fill=_GRID)
            self.d.text((x, bottom + 4), f"{int(v)}", fill=_TEXT, font=self.small, anchor="mt")

    def _y_axis(self, top: int, bottom: int, vmax: float, step: float, fmt, right: bool = False,
                stop: float | None = None) -> None:
        """Ticks 0, step, ... up to `stop` (default vmax), placed on a 0..vmax axis."""
        for v in np.arange(0, (vmax if stop is None else stop) + step * 0.01, step):
            y = bottom - v / vmax * (bottom - top)
            if not right:
                self.d.line([(self.left, y), (self.right, y)], fill=_GRID)
            x, anchor = (self.right + 6, "lm") if right else (self.left - 6, "rm")
            self.d.text((x, y), fmt(v), fill=_TEXT, font=self.small, anchor=anchor)

    def _memory_panel(self, top: int, bottom: int) -> None:
        s = self.s
        cats = [k for k in s if k.startswith("cat:")]
        stack = np.cumsum([s[k] for k in cats], axis=0) if cats else np.zeros((1, len(s["ms"])))
        memory_peak = float(stack[-1].max())
        vmax = memory_axis_max(memory_peak, s["budget"])
        step = _byte_step(vmax, 6)
        vmax = np.ceil(vmax / step) * step
        self._y_axis(top, bottom, vmax, step, lambda v: format_bytes(int(v)))
        self._frame_axis(top, bottom)
        xs = self.px(s["frame"])

        def ys(v: np.ndarray) -> np.ndarray:
            return bottom - np.minimum(v, vmax) / vmax * (bottom - top)

        lower = np.zeros_like(xs)
        for i, key in enumerate(cats):
            upper = stack[i]
            poly = list(zip(xs, ys(upper))) + list(zip(xs[::-1], ys(lower)[::-1]))
            if len(xs) == 1:  # one frame: a thin column instead of an area
                poly = [(xs[0] - 2, ys(upper)[0]), (xs[0] + 2, ys(upper)[0]),
                        (xs[0] + 2, ys(lower)[0]), (xs[0] - 2, ys(lower)[0])]
            self.d.polygon(poly, fill=category_color(key[4:], i))
            lower = upper
        self.d.line(list(zip(xs, ys(s["budget"]))) if len(xs) > 1 else
                    [(self.left, ys(s["budget"])[0]), (self.right, ys(s["budget"])[0])],
                    fill=BUDGET_COLOR, width=3)
        smax = scale_axis_max(s["scale"])
        scale_y = bottom - np.clip(np.nan_to_num(s["scale"]), 0, smax) / smax * (bottom - top)
        if len(xs) > 1:
            self.d.line(list(zip(xs, scale_y)), fill=SCALE_COLOR, width=2)
        else:
            self.d.line([(self.left, scale_y[0]), (self.right, scale_y[0])], fill=SCALE_COLOR,
                        width=2)
        self.extents = {"budget": (float(ys(s["budget"]).min()), float(ys(s["budget"]).max())),
                        "render scale": (float(scale_y.min()), float(scale_y.max()))}
        self.panels = {"memory": (top, bottom)}
        self._y_axis(top, bottom, smax, 0.25, lambda v: f"{v:.2f}", right=True,
                     stop=smax / 1.1)
        budget_max = float(np.nanmax(s["budget"])) if len(s["budget"]) else 0.0
        if budget_max > 4 * max(memory_peak, 1.0):
            self.d.text((self.right - 8, bottom - 8),
                        f"peak {format_bytes(int(memory_peak))} = "
                        f"{100 * memory_peak / budget_max:.2g}% of the budget",
                        fill=_TEXT, font=self.small, anchor="rb")
        self._frame_box(top, bottom, "memory by category (bytes)", "render scale")
        legend = [(c[4:], category_color(c[4:], i)) for i, c in enumerate(cats)]
        legend += [("budget", BUDGET_COLOR), ("render scale", SCALE_COLOR)]
        self._legend(legend, top + 8)

    def _tier_panel(self, top: int, bottom: int, tiers: list[str]) -> None:
        """Resident texture bytes stacked by priority tier (visible at the bottom)."""
        stack = np.cumsum([self.s[k] for k in tiers], axis=0)
        vmax = max(float(stack[-1].max()), 1.0) * 1.08
        step = _byte_step(vmax, 3)
        vmax = np.ceil(vmax / step) * step
        self._y_axis(top, bottom, vmax, step, lambda v: format_bytes(int(v)))
        self._frame_axis(top, bottom)
        xs = self.px(self.s["frame"])
        lower = np.zeros_like(xs)
        for i, key in enumerate(tiers):
            upper = stack[i]
            ys_up = bottom - upper / vmax * (bottom - top)
            ys_lo = bottom - lower / vmax * (bottom - top)
            if len(xs) == 1:
                poly = [(xs[0] - 2, ys_up[0]), (xs[0] + 2, ys_up[0]), (xs[0] + 2, ys_lo[0]),
                        (xs[0] - 2, ys_lo[0])]
            else:
                poly = list(zip(xs, ys_up)) + list(zip(xs[::-1], ys_lo[::-1]))
            self.d.polygon(poly, fill=TIER_COLORS[key[5:]])
            lower = upper
        self.panels["tiers"] = (top, bottom)
        self._frame_box(top, bottom, "texture bytes resident by priority tier", None)
        self._legend([(k[5:], TIER_COLORS[k[5:]]) for k in tiers], top + 8)

    def _time_panel(self, top: int, bottom: int) -> None:
        ms = self.s["ms"]
        finite = np.isfinite(ms)
        self.skipped_frame_times = int((~finite).sum())
        good = ms[finite]
        vmax = max(float(np.percentile(good, 99.5)) * 1.15, 1.0) if good.size else 1.0
        step = _nice_step(vmax, 4)
        vmax = np.ceil(vmax / step) * step
        self._y_axis(top, bottom, vmax, step, lambda v: f"{v:g} ms")
        self._frame_axis(top, bottom)
        xs = self.px(self.s["frame"])
        ys = bottom - np.minimum(np.where(finite, ms, 0.0), vmax) / vmax * (bottom - top)
        # One polyline per run of finite times: a skipped frame leaves a gap, not a spike.
        breaks = np.flatnonzero(np.diff(finite.astype(np.int8)) != 0) + 1
        for run in np.split(np.arange(len(ms)), breaks):
            if not run.size or not finite[run[0]]:
                continue
            if run.size > 1:
                self.d.line(list(zip(xs[run], ys[run])), fill=(50, 110, 200), width=2)
            else:
                x, y = xs[run[0]], ys[run[0]]
                self.d.ellipse([x - 3, y - 3, x + 3, y + 3], fill=(50, 110, 200))
        p50 = float(np.percentile(good, 50)) if good.size else float("nan")
        if np.isfinite(p50):
            y50 = bottom - min(p50, vmax) / vmax * (bottom - top)
            self.d.line([(self.left, y50), (self.right, y50)], fill=(120, 120, 120), width=1)
            self.d.text((self.right - 4, y50 - 3), f"p50 {p50:.2f} ms", fill=_TEXT,
                        font=self.small, anchor="rb")
        if self.skipped_frame_times:
            self.d.text((self.left + 6, top + 6),
                        f"{self.skipped_frame_times} non-finite frame time(s) skipped",
                        fill=BUDGET_COLOR, font=self.small, anchor="lt")
        self._frame_box(top, bottom, "frame time", None)

    def _frame_box(self, top: int, bottom: int, title: str, right_label: str | None) -> None:
        self.d.rectangle([self.left, top, self.right, bottom], outline=_AXIS, width=1)
        self.d.text((self.left, top - 6), title, fill=_TEXT, font=self.font, anchor="lb")
        if right_label:
            self.d.text((self.right + 6, top - 6), right_label, fill=_TEXT, font=self.small,
                        anchor="lb")

    def _legend(self, items: list[tuple[str, RGB]], y: int) -> None:
        x = self.left + 10
        for name, color in items:
            self.d.rectangle([x, y + 2, x + 12, y + 12], fill=color)
            self.d.text((x + 16, y + 7), name, fill=_TEXT, font=self.small, anchor="lm")
            x += 28 + int(self.d.textlength(name, font=self.small))

    def _draw(self) -> None:
        sm = self.summary
        head = (f"{sm['frames']} frames   budget {format_bytes(sm['budget_bytes'])}   "
                f"peak {format_bytes(sm['peak_bytes'])}   frame p50 {sm['frame_ms_p50']:.2f} ms"
                f"  p99 {sm['frame_ms_p99']:.2f} ms   leaked {sm['leaked_objects']}")
        self.d.text((self.left, 14), head, fill=_TEXT, font=self.font, anchor="lt")
        tiers = [k for k in self.s if k.startswith("tier:")]
        if tiers:  # a third panel: what the texture bytes are spent on
            split, tier_bottom = int(self.h * 0.50), int(self.h * 0.70)
            self._memory_panel(56, split)
            self._tier_panel(split + 40, tier_bottom, tiers)
            self._time_panel(tier_bottom + 44, self.h - 36)
        else:
            split = int(self.h * 0.64)
            self._memory_panel(56, split)
            self._time_panel(split + 56, self.h - 36)
        self.d.text(((self.left + self.right) / 2, self.h - 6), "frame", fill=_TEXT,
                    font=self.font, anchor="mb")

    def save(self, path: Path) -> None:
        from PIL.PngImagePlugin import PngInfo

        info = PngInfo()
        info.add_text(*TIMELINE_MARK)
        self.im.save(path, format="PNG", pnginfo=info)


# ---------------------------------------------------------------------------- matplotlib
def _matplotlib(report: dict[str, Any], out: Path, size: tuple[int, int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = _series(report)
    cats = [k for k in s if k.startswith("cat:")]
    tiers = [k for k in s if k.startswith("tier:")]
    fig, axes = plt.subplots(3 if tiers else 2, 1, figsize=(size[0] / 100, size[1] / 100),
                             dpi=100, sharex=True,
                             gridspec_kw={"height_ratios": [2, 1, 1] if tiers else [2, 1]})
    ax, ax_ms = axes[0], axes[-1]
    if tiers:
        axes[1].stackplot(s["frame"], *[s[k] / 1024 ** 2 for k in tiers],
                          labels=[k[5:] for k in tiers],
                          colors=[np.array(TIER_COLORS[k[5:]]) / 255 for k in tiers])
        axes[1].set_ylabel("MiB by tier")
        axes[1].legend(loc="upper left", fontsize=8, ncol=4)
    mib = 1024 ** 2
    ax.stackplot(s["frame"], *[s[k] / mib for k in cats], labels=[k[4:] for k in cats],
                 colors=[np.array(category_color(k[4:], i)) / 255 for i, k in enumerate(cats)])
    ax.plot(s["frame"], s["budget"] / mib, color=np.array(BUDGET_COLOR) / 255, lw=2,
            label="budget")
    ax.set_ylim(0, memory_axis_max(float(np.sum([s[k] for k in cats], axis=0).max()
                                         if cats else 0.0), s["budget"]) / mib)
    ax.set_ylabel("MiB")
    scale_ax = ax.twinx()
    scale_ax.plot(s["frame"], s["scale"], color=np.array(SCALE_COLOR) / 255, lw=1.5)
    scale_ax.set_ylim(0, scale_axis_max(s["scale"]))
    scale_ax.set_ylabel("render scale")
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    ax_ms.plot(s["frame"], np.where(np.isfinite(s["ms"]), s["ms"], np.nan), lw=1)
    ax_ms.set_ylabel("frame ms")
    ax_ms.set_xlabel("frame")
    fig.tight_layout()
    fig.savefig(out, format="png", metadata={TIMELINE_MARK[0]: TIMELINE_MARK[1]})
    plt.close(fig)
