"""The wall flights' shared setup: the run's generated wall set, and the demand an
unlimited deterministic flight measures (its peak want and its always-resident tails)."""
from __future__ import annotations

from pathlib import Path

from lab.wall import WallProfile, use_wall_streamer, wall_flight
from engine.gl.device import Device


def free_flight(device: Device, profile: WallProfile, cache: Path):
    """(the unlimited tiered flight's probe, its peak wanted bytes, its tails' bytes)."""
    free = wall_flight(device, profile, use_wall_streamer("tiered", 1 << 40), pace=False,
                       deterministic=True, cache_dir=cache)
    return (free, max(r["wanted_bytes"] for r in free.rows),
            max(r["min_bytes"] for r in free.rows))
