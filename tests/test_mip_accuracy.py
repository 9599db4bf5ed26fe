"""The streaming accuracy target, measured: with the streamer (and GPU feedback) serving the
gallery from half of its all-resident texture bytes, at least 95% of on-screen texels sample
a level within one of what they would sample with everything resident. The mip-debug view,
read from a screenshot, tells the same story."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import textures
from engine.memory.sizes import texture_bytes
from engine.demos.gallery_assets import gallery_textures
from engine.render.imagecompare import save_png
from engine.app.loop import FrameContext, SceneFactory
from engine.hosts.run import run_scene
from engine.render.accuracy import (
    AccuracyResult,
    accuracy_from_levels,
    classify_mip_debug,
    measure_accuracy,
)

log = logging.getLogger(__name__)

SIZE = (192, 108)
#: The tails-only check needs a screen on which the close panels want more than the tails.
TAILS_SIZE = (320, 180)
#: BC1: llvmpipe samples it far faster than the gallery's default BC7; the levels the
#: policy keeps and the texels' levels do not depend on the block format.
OPTIONS = {"count": 16, "texture_size": 512, "format": "bc1"}
FRAMES, SETTLE, EVERY = 200, 100, 20
TARGET = 0.95


# ---------------------------------------------------------------------- pure
def test_accuracy_counts_levels_missing_per_pixel():
    # (wanted LOD, resident, levels - 1, has albedo)
    levels = np.array([[0.4, 0.0, 9, 1],    # exact
                       [1.9, 2.0, 9, 1],    # one short
                       [0.2, 2.0, 9, 1],    # two short
                       [12.0, 9.0, 9, 1],   # wanted beyond the chain: clamped, exact
                       [0.0, 5.0, 9, 0]],   # no albedo: not counted
                      np.float32)
    assert accuracy_from_levels(levels) == AccuracyResult(0.75, 0.5, 4)
    assert accuracy_from_levels(np.zeros((2, 2, 4))) == AccuracyResult(1.0, 1.0, 0)


def test_debug_view_colours_classify():
    image = np.array([[[30, 200, 50], [230, 205, 25], [230, 40, 25], [70, 70, 70]]], np.uint8)
    assert classify_mip_debug(image) == AccuracyResult(2 / 3, 1 / 3, 3)


# ---------------------------------------------------------------------- the gallery
@pytest.fixture(scope="module")
def gallery_cache(user_cache) -> Path:
    return user_cache / "gallery"


def all_resident_bytes(cache: Path) -> int:
    total = 0
    for path in gallery_textures(OPTIONS["count"], OPTIONS["texture_size"], OPTIONS["format"],
                                 cache_dir=cache).paths:
        tf = textures.open(path)
        total += texture_bytes(tf.format, tf.width, tf.height, levels=len(tf.levels))
    return total


def with_pool(pool_bytes: int) -> SceneFactory:
    """The gallery with the streamer's pool fixed at `pool_bytes` (react=False keeps the
    resolution controller out, so the render scale stays 1; whatever the governor grants,
    the streamer is granted exactly this pool)."""
    from engine.demos import DEMOS
    gallery = DEMOS["gallery"].factory

    def build(device, provider, options: Mapping[str, Any]):
        grant = provider.grant
        provider.grant = lambda _granted: grant(pool_bytes)
        return gallery(device, provider, options)
    return build


def debug_view(ctx: FrameContext) -> np.ndarray:
    """This frame rendered again in the mip-debug view: (H, W, 3) uint8."""
    renderer = ctx.renderer
    renderer.view_mode = "mip"
    try:
        renderer.render(ctx.scene)
        renderer.present()
        return renderer.read_output()
    finally:
        renderer.view_mode = "lit"


def run(device, cache: Path, pool_bytes: int, frames: int, measure_from: int,
        size: tuple[int, int] = SIZE):
    """Run the streaming gallery with feedback; accuracy every EVERY frames from
    `measure_from`, and the debug view on the last frame."""
    measured: list[AccuracyResult] = []
    seen: dict[str, Any] = {}

    def hook(ctx: FrameContext) -> None:
        if ctx.frame >= measure_from and (ctx.frame - measure_from) % EVERY == 0:
            measured.append(measure_accuracy(ctx.device, ctx.scene, ctx.provider,
                                             ctx.renderer.render_size))
        if ctx.frame == frames - 1:
            seen["last"] = measure_accuracy(ctx.device, ctx.scene, ctx.provider,
                                            ctx.renderer.render_size)
            seen["debug_image"] = debug_view(ctx)
            seen["debug"] = classify_mip_debug(seen["debug_image"])
            seen["feedback"] = ctx.provider.feedback_mips
    result = run_scene(with_pool(pool_bytes), frames=frames, size=size,
                       device=device, react=False, provider="streaming", feedback=True,
                       options={**OPTIONS, "cache_dir": cache}, on_frame=[hook])
    return result, measured, seen


@pytest.mark.slow
@pytest.mark.parametrize("share", [0.5, 0.1])
@pytest.mark.needs("BC3 sampling")  # BC7 tiles or budgets sized for BC7 need BC7 or BC3
def test_streaming_gallery_meets_the_accuracy_target(device, gallery_cache, share, tmp_path):
    """0.5: the issue's budget, half the all-resident bytes; at this size the scripted camera
    never wants that much, so it measures streaming lag. 0.1: a pool the wanted detail
    exceeds, so the policy must choose what to leave coarse."""
    pool = int(all_resident_bytes(gallery_cache) * share)
    result, measured, seen = run(device, gallery_cache, pool, FRAMES, SETTLE)
    assert result.summary["leaked_objects"] == 0
    assert max(f["by_category"].get("texture.streamed", 0) for f in result.frames) <= pool
    if share < 0.5:
        assert max(f["texture_wanted_bytes"] for f in result.frames) > pool  # it binds
    assert seen["feedback"] is not None and np.isfinite(seen["feedback"]).any()
    worst = min(measured, key=lambda r: r.fraction_within_one)
    shot = tmp_path / "mipdebug.png"
    save_png(seen["debug_image"], shot)
    log.info("pool %.0f%%: accuracy over frames %d..%d: worst %s; debug view at the end (%s) "
             "%s vs %s", share * 100, SETTLE, FRAMES - 1, worst, shot, seen["debug"],
             seen["last"])
    assert all(r.pixels > 0.1 * SIZE[0] * SIZE[1] for r in measured)  # panels on screen
    assert worst.fraction_within_one >= TARGET, measured
    debug, last = seen["debug"], seen["last"]
    assert debug.fraction_within_one >= TARGET
    assert abs(debug.fraction_within_one - last.fraction_within_one) <= 0.03
    assert abs(debug.fraction_exact - last.fraction_exact) <= 0.05


def test_the_measure_sees_missing_levels(device, gallery_cache):
    """With no pool beyond the always-resident tails the close panels lack several levels:
    the measure must say so, and the debug view must turn red to the same extent."""
    result, _, seen = run(device, gallery_cache, 0, 12, 12, TAILS_SIZE)
    assert result.summary["leaked_objects"] == 0
    last, debug = seen["last"], seen["debug"]
    log.info("tails only: %s; debug view %s", last, debug)
    assert last.fraction_within_one < TARGET and last.fraction_exact < 0.5
    assert abs(debug.fraction_within_one - last.fraction_within_one) <= 0.05
