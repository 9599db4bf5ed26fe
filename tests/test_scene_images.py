"""Each demo scene against a reference image (the gallery's is in test_render.py).

Filament's criterion on Mesa: at most 0.1% of pixels off by more than 5/255
(engine.testing.assert_image_close). References live in tests/reference/; a missing one is
written and the test fails, ENGINE_UPDATE_REFERENCES=1 rewrites them all.

The static provider makes the pictures: the streamer's residency at frame N depends on when
its I/O threads deliver, so its picture is not a function of N. What the streamer shows is
held to the budget in test_pressure.py instead.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.gl.device import Device
from engine.render.runner import RunResult, run_scene
from engine.testing import assert_image_close, assert_no_leaks

REFERENCE = Path(__file__).resolve().parent / "reference"
W, H = 160, 120


@pytest.fixture(scope="module")
def gallery_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("images-gallery")


def _run(device: Device, name: str, frames: int, **kw: Any) -> RunResult:
    from demos import DEMOS

    demo = DEMOS[name]
    options = kw.pop("options", {})
    return run_scene(demo.factory, frames=frames, size=(W, H), device=device,
                     provider="static", options=options, on_frame=demo.hooks(options), **kw)


def test_pressure_under_a_cut_budget_matches_reference(device: Device,
                                                       gallery_cache: Path) -> None:
    """Frame 14 lies in the cycle's low quarter (frames 10-19 of 40): the picture is the
    gallery rendered at a reduced scale and upscaled, the case only this scene reaches."""
    result = _run(device, "pressure", 15, budget="2MiB",
                  options={"count": 8, "texture_size": 256, "cache_dir": gallery_cache,
                           "period": 40})
    assert_no_leaks(result)
    assert result.frames[-1]["budget_fraction"] < 1.0
    assert result.frames[-1]["render_scale"] < 1.0
    assert result.image is not None and result.image.shape == (H, W, 3)
    assert_image_close(result.image, REFERENCE / f"pressure_{W}x{H}.png")


@pytest.mark.parametrize("frames", [1, 20])
def test_gltf_matches_reference(device: Device, frames: int) -> None:
    """BoxTextured on its orbit: frame 0 and a third of a turn later (the orbit is a function
    of time only, so each frame has one picture)."""
    result = _run(device, "gltf", frames, budget="256MiB")
    assert_no_leaks(result)
    assert result.frames[-1]["render_scale"] == 1.0
    assert result.image is not None and result.image.shape == (H, W, 3)
    assert_image_close(result.image, REFERENCE / f"gltf_{W}x{H}_frame{frames - 1}.png")
