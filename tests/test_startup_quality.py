"""The startup bench's "full quality" must be reachable when textures stream as tiles: the
H200's gallery (4096^2, virtual by default) never reached it in 120 s because the check
compared the page cache's target size with its held size instead of asking which shown
tiles were missing."""
from dataclasses import replace

import pytest

from engine.app.providers import register_provider
from lab.startup import measure_startup
from lab.streaming import QUICK
from engine.streaming.provider import StreamingProvider



def _always_virtual(device, settings, clock):
    cfg = replace(settings.streamer, virtual="always")
    return StreamingProvider(device, cfg)


@pytest.mark.needs("BC1_RGB sampling")
def test_startup_reaches_full_quality_with_every_texture_virtual(device):
    register_provider("test-always-virtual", _always_virtual)
    run = measure_startup(device, QUICK, "test-always-virtual", timeout_s=30.0)
    assert run.full_quality_s is not None, f"not settled after {run.frames} frames"
    assert run.full_quality_s >= run.first_frame_s and run.frames > 1
