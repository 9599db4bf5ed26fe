"""CPU decode held to the GL driver's own decode (llvmpipe here), on random blocks.

Random blocks hit every block mode a format allows (BC1 3-colour / punch-through, BC3 colour
blocks with color0 <= color1, BC4 6-value mode, all BC7 modes), not only what an encoder emits.
The driver decodes via glGetTexImage(GL_RGBA, GL_UNSIGNED_BYTE) through `Device.read_level`.
sRGB formats are left out: the stored bytes are the same blocks as their UNORM twins.
"""
from __future__ import annotations

import numpy as np
import pytest

from engine.memory.sizes import level_bytes
from engine.textures import bcn
from engine.textures.decode import decode_image
from driver_needs import require

W, H = 64, 32
FORMATS = ["BC1_RGB", "BC1_RGBA", "BC2", "BC3", "BC4", "BC5", "BC6H_UF", "BC7",
           "BC4_SNORM", "BC5_SNORM"]


def _gpu_rgba(device, fmt: str, data: bytes) -> np.ndarray:
    tex = device.storage_texture(fmt, W, H, label=f"decode-{fmt}")
    try:
        device.commands.upload(tex, 0, data)
        return np.frombuffer(device.commands.read_level(tex, 0, rgba8=True), np.uint8).reshape(H, W, 4)
    finally:
        device.release(tex)


def _snorm_as_unorm_readback(fmt: str, data: bytes) -> np.ndarray:
    """What an UNSIGNED_BYTE read-back of SNORM texels gives: negatives clamp to 0."""
    channels = 1 if fmt.startswith("BC4") else 2
    b = np.frombuffer(data, np.uint8).reshape(H // 4, W // 4, 8 * channels)
    out = np.zeros((H // 4, W // 4, 16, 4), np.uint8)
    out[..., 3] = 255
    for ch in range(channels):
        f = np.maximum(bcn.channel_texels(b, 8 * ch, signed=True) / 127.0, -1.0)
        out[..., ch] = np.rint(np.clip(f, 0.0, 1.0) * 255.0).astype(np.uint8)
    return bcn._to_image(out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_cpu_decode_equals_gl(device, fmt: str) -> None:
    require(device, f"{fmt} sampling")
    data = np.random.default_rng(11).integers(0, 256, level_bytes(fmt, W, H),
                                              dtype=np.uint8).tobytes()
    gpu = _gpu_rgba(device, fmt, data)
    if fmt.endswith("SNORM"):
        ours = _snorm_as_unorm_readback(fmt, data)
    else:
        ours = decode_image(fmt, data, W, H)
    diff = np.abs(ours.astype(int) - gpu.astype(int))
    # texture2ddecoder's half -> 8-bit rounding of BC6H is off by up to 2 on a few random texels;
    # real encoder output (the CTS BC6H files) matches exactly.
    tolerance = 2 if fmt == "BC6H_UF" else 0
    assert diff.max() <= tolerance, (f"{fmt}: {np.count_nonzero(diff.max(-1))} of {W * H} "
                                     f"texels differ, max {diff.max()}")
