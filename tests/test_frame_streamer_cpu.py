"""The frame bench's streamer figures (issue 11): the `stream_ms` columns every frame-bench
row carries, and `--profile-streamer`'s still and moving timings with its profile."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

from lab import frame


def test_frame_rows_report_the_streamers_share(device) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        texture = frame._texture_file(Path(tmp), size=64)
        row = frame.measure(device, 20, "batched", 4, (64, 36), texture)
    for key in ("stream_ms_p50", "stream_ms_p99"):
        assert math.isfinite(row[key]) and row[key] > 0.0, key
    assert row["stream_ms_p50"] <= row["stream_ms_p99"]
    # the streamer's share is a part of the frame's CPU time, never more
    assert row["stream_ms_p50"] <= row["cpu_ms_p99"]


def test_profile_streamer_times_a_still_and_a_moving_camera(device) -> None:
    stats, text = frame.profile_streamer(device, 30, frames=12, size=(64, 36), top=8)
    assert stats["textures"] == 30 and stats["frames"] == 12
    for key in ("stream_ms_p50", "stream_ms_p99", "moving_stream_ms_p50",
                "moving_stream_ms_p99"):
        assert math.isfinite(stats[key]) and stats[key] > 0.0, key
    assert stats["stream_ms_p50"] <= stats["stream_ms_p99"]
    assert stats["moving_stream_ms_p50"] <= stats["moving_stream_ms_p99"]
    # the profile is of the streamer's own code
    assert "function calls" in text
    assert "engine/streaming/" in text.replace("\\", "/")
