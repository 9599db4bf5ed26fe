"""The user-facing CI API: run a scene headless and assert on budget, leaks and pixels.

    from engine.testing import run_headless, assert_under_budget, assert_no_leaks

    def test_my_scene():
        result = run_headless("gltf", frames=30, budget="64MiB")
        assert_under_budget(result)
        assert_no_leaks(result)
        assert_image_close(result.image, "tests/refs/my_scene.png")

Image comparison uses Filament's criterion on Mesa (at most 0.1% of pixels off by more than
5/255): software rasterizers differ from GPUs and from each other by a code value here and
there, and a render test should fail on a wrong picture, not on rounding.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .diagnostics.report import build_report
from .render.imagecompare import compare, diff_image, load_png, save_png
from .app.loop import RunResult, SceneFactory
from .hosts.run import run_scene

log = logging.getLogger(__name__)

__all__ = [
    "RunResult",
    "assert_image_close",
    "assert_no_leaks",
    "assert_under_budget",
    "report_of",
    "run_headless",
]

UPDATE_ENV = "ENGINE_UPDATE_REFERENCES"


def _resolve(scene: str | SceneFactory) -> tuple[SceneFactory, list]:
    """A demo name or a factory -> (factory, the demo's scripted hooks)."""
    if callable(scene):
        return scene, []
    try:
        from engine.demos import DEMOS
    except ImportError as exc:
        raise ValueError(f"scene {scene!r}: named demos need the 'demos' package ({exc})") \
            from exc
    if scene not in DEMOS:
        raise ValueError(f"unknown demo scene {scene!r}; known: {', '.join(sorted(DEMOS))}")
    return DEMOS[scene].factory, DEMOS[scene].hooks


def run_headless(scene: str | Callable[..., Any], *, frames: int = 60,
                 budget: str | int = "256MiB", size: tuple[int, int] = (320, 240),
                 **kw: Any) -> RunResult:
    """Run a demo (by name) or a scene factory `(device, provider, options) -> Scene`
    headless for `frames` frames. Extra keywords are `engine.app.settings.RunSettings` fields
    (provider=, screenshot=, report=, hud=, deterministic=, ...) or `device=`."""
    factory, hooks = _resolve(scene)
    options = dict(kw.pop("options", None) or {})
    options.setdefault("frames", frames)
    on_frame = list(kw.pop("on_frame", ())) + (list(hooks(options)) if hooks else [])
    return run_scene(factory, frames=frames, size=size, budget=budget, headless=True,
                     options=options, on_frame=on_frame, **kw)


def report_of(result: RunResult) -> dict[str, Any]:
    """The validated report document of a run (see engine.diagnostics.report)."""
    return build_report(result.frames, leaked_objects=int(result.summary["leaked_objects"]),
                        extra=result.summary)


def assert_under_budget(result: RunResult, *, allow_frames: int = 0) -> None:
    """Every frame's peak ledger bytes stayed within that frame's budget (at most
    `allow_frames` frames over, for scenes that script a budget drop the engine needs a
    frame to follow)."""
    over = [f for f in result.frames
            if int(f.get("peak_bytes", f["total_bytes"])) > int(f["budget_bytes"])]
    if len(over) > allow_frames:
        worst = max(over, key=lambda f: int(f.get("peak_bytes", f["total_bytes"]))
                    - int(f["budget_bytes"]))
        raise AssertionError(
            f"{len(over)} frame(s) over budget (allowed {allow_frames}); worst: frame "
            f"{worst['frame']} used {worst.get('peak_bytes', worst['total_bytes'])} bytes of "
            f"{worst['budget_bytes']} ({worst['by_category']})")


def assert_no_leaks(result: RunResult) -> None:
    """The run released every GL object it made (the runner counts them after release)."""
    leaked = int(result.summary["leaked_objects"])
    if leaked:
        raise AssertionError(f"{leaked} GL object(s) leaked by the run (the log names each)")


def assert_image_close(img: np.ndarray, ref_png: str | Path, tol: int = 5,
                       max_fraction: float = 0.001) -> None:
    """`img` matches the reference PNG: at most `max_fraction` of pixels differ by more than
    `tol` code values. On failure a diff PNG (red = differing pixels) and the actual image
    are written next to the reference, and the message says where. A missing reference, or
    ENGINE_UPDATE_REFERENCES=1, writes the reference instead (and fails when missing, so a
    new reference is never silently accepted in CI)."""
    ref_png = Path(ref_png)
    rgb = np.ascontiguousarray(img[..., :3]).astype(np.uint8)
    if os.environ.get(UPDATE_ENV) == "1":
        save_png(rgb, ref_png)
        log.warning("updated reference %s", ref_png)
        return
    if not ref_png.is_file():
        save_png(rgb, ref_png)
        raise AssertionError(f"no reference image at {ref_png}; wrote the current image there "
                             "(check it and commit it)")
    ref = load_png(ref_png)
    result = compare(rgb, ref, tol, max_fraction)
    if result.ok:
        return
    diff_path = ref_png.with_name(ref_png.stem + ".diff.png")
    actual_path = ref_png.with_name(ref_png.stem + ".actual.png")
    save_png(rgb, actual_path)
    if rgb.shape == ref.shape:
        save_png(diff_image(rgb, ref, tol), diff_path)
        where = f"diff: {diff_path}, actual: {actual_path}"
    else:
        where = f"shape {rgb.shape} vs reference {ref.shape}; actual: {actual_path}"
    raise AssertionError(f"image differs from {ref_png}: {result}; {where}")
