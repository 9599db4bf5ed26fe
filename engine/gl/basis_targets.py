"""Tell the Basis Universal transcoder which block formats this driver samples.

engine.textures.basis picks a transcode target per file (BC4/BC5, BC7, BC3/BC1, RGBA8) but
sits below the GL layer and cannot ask the driver. This is the one place that knows both:
it hands the device's measured compressed formats (engine.gl.capabilities: claimed by the
driver AND creatable) down as plain names. Call it once after making a device and before
opening Basis files; add_to_scene (glTF) does so for the scenes it loads.
"""
from __future__ import annotations

import logging

from ..textures import basis

log = logging.getLogger(__name__)


def configure(device) -> frozenset[str]:
    """Restrict Basis transcode targets to what `device` samples; returns that set."""
    names = frozenset(device.caps.compressed)
    if names != basis.sampled_formats():
        basis.set_sampled_formats(names)
        log.debug("Basis transcode targets limited to %s", ", ".join(sorted(names)) or "RGBA8")
    return names
