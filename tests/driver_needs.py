"""Skipping what this driver cannot run, naming what it lacks.

Feature names are the device profile's own (`engine info`'s "missing" line: "BC7
sampling", "ARB_buffer_storage", ...), plus BATCHED for the batched frame as a whole and
COMPUTE for compute shaders. On a full driver nothing skips; under an emulated lesser driver
(tests/test_drivers.py) each skip says which feature it waits for.
"""
from __future__ import annotations

import pytest

from engine.gl.profile import DeviceProfile

BATCHED = "the batched frame"
COMPUTE = "compute shaders"
#: The profile's names for what the batched frame is made of.
_BATCHED_PARTS = ("GLSL 4.30", "ARB_multi_draw_indirect", "ARB_shader_storage_buffer_object",
                  "ARB_shader_draw_parameters", "ARB_base_instance")


def lacking(profile: DeviceProfile, *features: str) -> list[str]:
    """The features of `features` this profile lacks, each as a skip reason names it."""
    out: list[str] = []
    for f in features:
        if f == BATCHED:
            if profile.draw_path != "batched":
                parts = [m for m in profile.missing if m in _BATCHED_PARTS]
                out.append(f"{BATCHED} ({', '.join(parts)})")
        elif f == COMPUTE:
            if not profile.compute:
                out.append(f"{COMPUTE} (GL 4.3 / ARB_compute_shader)")
        elif f in profile.missing:
            out.append(f)
    return out


def require(device, *features: str) -> None:
    """Skip the calling test unless `device`'s driver has every feature."""
    missing = lacking(device.profile, *features)
    if missing:
        pytest.skip("this driver lacks " + "; ".join(missing))
