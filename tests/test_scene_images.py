"""Each demo scene against a reference image (the gallery's is in test_render.py).

Filament's criterion on Mesa: at most 0.1% of pixels off by more than 5/255
(engine.testing.assert_image_close). References live in tests/reference/; a missing one is
written and the test fails, ENGINE_UPDATE_REFERENCES=1 rewrites them all.

The static provider makes most pictures. The streamer's residency at frame N depends on when
its I/O threads deliver, unless the run is deterministic (`deterministic=True`: the frame clock
and inline reads are injected), which the streamed reference below uses.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.gl.device import Device
from engine.app.loop import RunResult
from engine.hosts.run import run_scene
from engine.testing import assert_image_close, assert_no_leaks

REFERENCE = Path(__file__).resolve().parent / "reference"
W, H = 160, 120


@pytest.fixture(scope="module")
def gallery_cache(generated_assets: Path) -> Path:
    return generated_assets / "gallery"


def _run(device: Device, name: str, frames: int, **kw: Any) -> RunResult:
    from engine.demos import DEMOS

    demo = DEMOS[name]
    options = kw.pop("options", {})
    kw.setdefault("provider", "static")
    return run_scene(demo.factory, frames=frames, size=(W, H), device=device,
                     options=options, on_frame=demo.hooks(options), **kw)


@pytest.mark.slow
@pytest.mark.needs("BC7 sampling")
def test_streamed_gallery_is_deterministic_and_matches_reference(device: Device,
                                                                 gallery_cache: Path) -> None:
    """The streamer with the injected frame clock and inline reads: frame 24 of the flight is
    the same picture on every run (detail still arriving mid-flight, fades included), and it
    matches its reference."""
    opts = {"count": 8, "texture_size": 256, "cache_dir": gallery_cache}
    runs = [_run(device, "gallery", 25, budget="256MiB", provider="streaming",
                 deterministic=True, options=dict(opts)) for _ in range(2)]
    for result in runs:
        assert_no_leaks(result)
    first, second = (r.image for r in runs)
    assert first is not None and (first == second).all()
    resident = [f["texture_resident_bytes"] for f in runs[0].frames]
    assert resident[-1] > resident[0]  # detail streamed in during the flight
    assert [f["texture_resident_bytes"] for f in runs[1].frames] == resident
    assert_image_close(first, REFERENCE / f"gallery_streamed_{W}x{H}.png")


@pytest.mark.needs("BC7 sampling")
def test_pressure_under_a_cut_budget_matches_reference(device: Device,
                                                       gallery_cache: Path) -> None:
    """Frame 14 lies in the cycle's low quarter (frames 10-19 of 40): the picture is the
    gallery rendered at a reduced scale and upscaled, the case only this scene reaches."""
    result = _run(device, "pressure", 15, budget="2MiB",
                  options={"count": 8, "texture_size": 256, "cache_dir": gallery_cache,
                           "period": 40, "pressure_from": "start"})
    assert_no_leaks(result)
    assert result.frames[-1]["budget_fraction"] < 1.0
    assert result.frames[-1]["render_scale"] < 1.0
    assert result.image is not None and result.image.shape == (H, W, 3)
    assert_image_close(result.image, REFERENCE / f"pressure_{W}x{H}.png")


@pytest.mark.parametrize("frames", [1, 20])
@pytest.mark.needs("BC7 sampling")
def test_gltf_matches_reference(device: Device, frames: int) -> None:
    """BoxTextured on its orbit: frame 0 and a third of a turn later (the orbit is a function
    of time only, so each frame has one picture)."""
    result = _run(device, "gltf", frames, budget="256MiB")
    assert_no_leaks(result)
    assert result.frames[-1]["render_scale"] == 1.0
    assert result.image is not None and result.image.shape == (H, W, 3)
    assert_image_close(result.image, REFERENCE / f"gltf_{W}x{H}_frame{frames - 1}.png")
