"""engine.testing: the CI API users call from their own tests."""
from __future__ import annotations

import numpy as np
import pytest

from engine.demos.gltf_demo import build
from engine.render.imagecompare import save_png
from engine.testing import (
    assert_image_close,
    assert_no_leaks,
    assert_under_budget,
    report_of,
    run_headless,
)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ENGINE_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_run_headless_factory_passes_the_checks(engine_device):
    result = run_headless(build, frames=4, budget="64MiB", device=engine_device)
    assert len(result.frames) == 4 and result.image.shape == (240, 320, 3)
    assert_under_budget(result)
    assert_no_leaks(result)
    assert report_of(result)["summary"]["frames"] == 4


def test_unknown_demo_name():
    with pytest.raises(ValueError, match="unknown demo"):
        run_headless("no-such-demo", frames=1)


def test_assertions_fail_with_reasons(engine_device):
    result = run_headless(build, frames=2, device=engine_device)
    result.frames[1]["peak_bytes"] = result.frames[1]["budget_bytes"] + 1
    with pytest.raises(AssertionError, match="1 frame"):
        assert_under_budget(result)
    assert_under_budget(result, allow_frames=1)
    result.summary["leaked_objects"] = 2
    with pytest.raises(AssertionError, match="2 GL object"):
        assert_no_leaks(result)


def test_image_close_filament_criterion(tmp_path):
    img = np.full((100, 100, 3), 128, np.uint8)
    ref = tmp_path / "ref.png"
    save_png(img, ref)
    noisy = img.copy()
    noisy[:10, 0] += 6  # 10 pixels = 0.1%: allowed
    noisy[50, 50] += 5  # within tolerance
    assert_image_close(noisy, ref)
    noisy[20, :2] += 6  # 12 pixels: too many
    with pytest.raises(AssertionError, match="ref.diff.png"):
        assert_image_close(noisy, ref)
    assert (tmp_path / "ref.diff.png").is_file() and (tmp_path / "ref.actual.png").is_file()


def test_missing_reference_is_written_and_fails(tmp_path):
    ref = tmp_path / "new.png"
    with pytest.raises(AssertionError, match="no reference"):
        assert_image_close(np.zeros((4, 4, 3), np.uint8), ref)
    assert ref.is_file()
