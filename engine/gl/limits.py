"""The driver's size limits for a rendered picture, asked once before a run allocates anything.

A run's output and render targets are textures, framebuffers and a viewport, so a size is
usable only when it is within GL_MAX_TEXTURE_SIZE, GL_MAX_RENDERBUFFER_SIZE and
GL_MAX_VIEWPORT_DIMS. Checking these up front turns a GLError from deep inside glTexImage2D
(or a driver that quietly clamps the viewport) into a clear message naming the limit.
"""
from __future__ import annotations

from typing import Any

from .extensions import raw_of

MAX_TEXTURE_SIZE = 0x0D33
MAX_VIEWPORT_DIMS = 0x0D3A
MAX_RENDERBUFFER_SIZE = 0x84E8


def max_output_size(device: Any) -> tuple[int, int]:
    """(max width, max height) of a picture this driver can render into and sample."""
    raw = raw_of(device)
    tex = int(raw.get_int(MAX_TEXTURE_SIZE))
    rb = int(raw.get_int(MAX_RENDERBUFFER_SIZE)) or tex
    vw, vh = (int(v) for v in raw.get_ints(MAX_VIEWPORT_DIMS, 2))
    edge = min(tex, rb)
    return min(edge, vw or edge), min(edge, vh or edge)
