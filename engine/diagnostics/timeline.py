"""The timeline picture of a run report: what memory did against the budget, frame by frame.

Top panel: ledger bytes by category as stacked areas, the budget as a line and the render
scale on a secondary axis, so a reader sees at a glance whether textures or render targets
gave way when the budget moved. Bottom panel: frame times. Drawn with Pillow by default (the
engine must not need matplotlib, and Pillow output is identical on every machine); pass
backend="matplotlib" for matplotlib's rendering when it is installed.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

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
SCALE_COLOR: RGB = (40, 40, 40)
_BG, _AXIS, _GRID, _TEXT = (255, 255, 255), (60, 60, 60), (228, 228, 228), (30, 30, 30)


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
    return out


def memory_axis_max(memory_max: float, budget: np.ndarray) -> float:
    """Top of the memory axis. A budget far above what the run used (80% of a 141 GB GPU
    against 100 MiB) would flatten every area to the floor: then the axis follows memory and
    the lowest budget, and the budget line is clipped at the top."""
    top = max(memory_max, float(budget.max()), 1.0)
    if top > 4 * max(memory_max, 1.0):
        top = max(memory_max, float(budget.min()), 1.0) * 1.5
    return top * 1.08


def render_timeline(report: dict[str, Any], out_png: Path | str, *,
                    size: tuple[int, int] = (1200, 720),
                    backend: Literal["pillow", "matplotlib"] = "pillow") -> Path:
    """Draw the report's timeline into `out_png` and return its path."""
    validate_report(report)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not report["frames"]:
        raise ValueError("the report has no frames to draw")
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

    def _y_axis(self, top: int, bottom: int, vmax: float, step: float, fmt, right: bool = False
                ) -> None:
        for v in np.arange(0, vmax + step * 0.01, step):
            y = bottom - v / vmax * (bottom - top)
            if not right:
                self.d.line([(self.left, y), (self.right, y)], fill=_GRID)
            x, anchor = (self.right + 6, "lm") if right else (self.left - 6, "rm")
            self.d.text((x, y), fmt(v), fill=_TEXT, font=self.small, anchor=anchor)

    def _memory_panel(self, top: int, bottom: int) -> None:
        s = self.s
        cats = [k for k in s if k.startswith("cat:")]
        stack = np.cumsum([s[k] for k in cats], axis=0) if cats else np.zeros((1, len(s["ms"])))
        vmax = memory_axis_max(float(stack[-1].max()), s["budget"])
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
        scale_y = bottom - np.clip(s["scale"], 0, 1) * (bottom - top)
        if len(xs) > 1:
            self.d.line(list(zip(xs, scale_y)), fill=SCALE_COLOR, width=2)
        self._y_axis(top, bottom, 1.0, 0.25, lambda v: f"{v:.2f}", right=True)
        self._frame_box(top, bottom, "memory by category (bytes)", "render scale")
        legend = [(c[4:], category_color(c[4:], i)) for i, c in enumerate(cats)]
        legend += [("budget", BUDGET_COLOR), ("render scale", SCALE_COLOR)]
        self._legend(legend, top + 8)

    def _time_panel(self, top: int, bottom: int) -> None:
        ms = self.s["ms"]
        vmax = max(float(np.percentile(ms, 99.5)) * 1.15, 1.0)
        step = _nice_step(vmax, 4)
        vmax = np.ceil(vmax / step) * step
        self._y_axis(top, bottom, vmax, step, lambda v: f"{v:g} ms")
        self._frame_axis(top, bottom)
        xs = self.px(self.s["frame"])
        ys = bottom - np.minimum(ms, vmax) / vmax * (bottom - top)
        if len(xs) > 1:
            self.d.line(list(zip(xs, ys)), fill=(50, 110, 200), width=2)
        else:
            self.d.ellipse([xs[0] - 3, ys[0] - 3, xs[0] + 3, ys[0] + 3], fill=(50, 110, 200))
        p50 = float(self.summary["frame_ms_p50"])
        y50 = bottom - min(p50, vmax) / vmax * (bottom - top)
        self.d.line([(self.left, y50), (self.right, y50)], fill=(120, 120, 120), width=1)
        self.d.text((self.right - 4, y50 - 3), f"p50 {p50:.2f} ms", fill=_TEXT,
                    font=self.small, anchor="rb")
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
        split = int(self.h * 0.64)
        self._memory_panel(56, split)
        self._time_panel(split + 56, self.h - 36)
        self.d.text(((self.left + self.right) / 2, self.h - 6), "frame", fill=_TEXT,
                    font=self.font, anchor="mb")

    def save(self, path: Path) -> None:
        self.im.save(path)


# ---------------------------------------------------------------------------- matplotlib
def _matplotlib(report: dict[str, Any], out: Path, size: tuple[int, int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = _series(report)
    cats = [k for k in s if k.startswith("cat:")]
    fig, (ax, ax_ms) = plt.subplots(2, 1, figsize=(size[0] / 100, size[1] / 100), dpi=100,
                                    sharex=True, gridspec_kw={"height_ratios": [2, 1]})
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
    scale_ax.set_ylim(0, 1.05)
    scale_ax.set_ylabel("render scale")
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    ax_ms.plot(s["frame"], s["ms"], lw=1)
    ax_ms.set_ylabel("frame ms")
    ax_ms.set_xlabel("frame")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


# ---------------------------------------------------------------------------- CLI
def add_parser(sub: Any) -> None:
    """`python -m engine report RUN.json -o timeline.png`."""
    p = sub.add_parser("report", help="validate a run report and draw its timeline PNG")
    p.add_argument("report", type=Path, help="a run report JSON (run_scene(report=...))")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="PNG to write (default: next to the report, .png)")
    p.add_argument("--backend", choices=("pillow", "matplotlib"), default="pillow")
    p.add_argument("--size", default="1200x720", help="WIDTHxHEIGHT in pixels")
    p.set_defaults(func=_report_main)


def _report_main(args: Any) -> int:
    from .report import ReportError, load_report

    try:
        report = load_report(args.report)
        w, h = (int(v) for v in args.size.lower().split("x"))
        out = render_timeline(report, args.output or args.report.with_suffix(".png"),
                              size=(w, h), backend=args.backend)
    except (ReportError, ValueError) as exc:
        log.error("%s", exc)
        return 1
    sm = report["summary"]
    print(f"{out}: {sm['frames']} frames, peak {format_bytes(sm['peak_bytes'])} of "
          f"{format_bytes(sm['budget_bytes'])}, p50 {sm['frame_ms_p50']:.2f} ms, "
          f"leaked {sm['leaked_objects']}")
    return 0
