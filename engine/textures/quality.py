"""Image quality numbers for bakes: PSNR (what the bake table reports) and SSIM.

PSNR is computed from a sum of squared errors so that a level encoded in strips by several
processes can be scored exactly by adding the strips' sums (`squared_error`). A bake scores
the decoded texture against what the user gave, at the input's own precision
(`reference_squared_error`: 16-bit values, linear float light), in units of the peak, so
the sums of 8-bit, 16-bit and float inputs all go through `psnr_from_sse(sse, n, peak=1)`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def squared_error(a: np.ndarray, b: np.ndarray, channels: Sequence[int] | None = None) -> tuple[float, int]:
    """(sum of squared differences, number of samples) of two same-shaped images over `channels`
    (all of them when None)."""
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch {a.shape} vs {b.shape}")
    if channels is not None:
        a, b = a[..., list(channels)], b[..., list(channels)]
    if a.dtype == np.uint8 and b.dtype == np.uint8:
        # Exact integer arithmetic: differences fit int16, their squares int32.
        diff = np.subtract(a, b, dtype=np.int16)
        square = np.square(diff, dtype=np.int32)
        return float(square.sum(dtype=np.int64)), int(diff.size)
    diff = (a.astype(np.float64) - b).ravel()
    return float(diff @ diff), int(diff.size)


def reference_squared_error(decoded: np.ndarray, reference: np.ndarray,
                            channels: Sequence[int] | None, space: str) -> tuple[float, int]:
    """(sum of squared errors in units of the peak, samples) of decoded RGBA8 bytes against
    a bake's high-precision reference, 0 only when the texture holds the input exactly.

    uint16 reference: the bytes scaled exactly to 16 bits (b * 257), compared in integers.
    float reference: the bytes as unorm (b / 255), or for `space == "linear"` the colour
    decoded from sRGB to linear light (alpha stays unorm). (An 8-bit input is scored with
    `squared_error` against its own bytes, divided by 255 squared.)
    """
    if decoded.shape != reference.shape:
        raise ValueError(f"shape mismatch {decoded.shape} vs {reference.shape}")
    if reference.dtype == np.uint16:
        sse, n = squared_error(decoded.astype(np.int64) * 257, reference.astype(np.int64),
                               channels)
        return sse / (65535.0 * 65535.0), n
    mapped = decoded.astype(np.float32) / np.float32(255.0)
    if space == "linear":
        from .mipgen import srgb_to_linear
        mapped[..., :3] = srgb_to_linear(decoded[..., :3])
    return squared_error(mapped, reference.astype(np.float32), channels)


def psnr_from_sse(sse: float, count: int, peak: float = 255.0) -> float:
    """PSNR in dB from a sum of squared errors over `count` samples; inf when identical."""
    if count <= 0:
        raise ValueError("PSNR of an empty image")
    if sse == 0:
        return float("inf")
    return float(10.0 * np.log10(peak * peak * count / sse))


def psnr(a: np.ndarray, b: np.ndarray, channels: Sequence[int] | None = None, peak: float = 255.0) -> float:
    """PSNR in dB between two images (uint8 by default peak) over `channels`."""
    return psnr_from_sse(*squared_error(a, b, channels), peak=peak)


def _gaussian_blur(img: np.ndarray, sigma: float = 1.5, radius: int = 5) -> np.ndarray:
    """Separable Gaussian blur of a float (H, W) image, 'valid' region only (as in Wang et al.)."""
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-(x * x) / (2 * sigma * sigma))
    k /= k.sum()
    size = k.size
    rows = sum(k[i] * img[i:img.shape[0] - size + 1 + i, :] for i in range(size))
    return sum(k[i] * rows[:, i:rows.shape[1] - size + 1 + i] for i in range(size))


def ssim(a: np.ndarray, b: np.ndarray, channels: Sequence[int] | None = None, peak: float = 255.0) -> float:
    """Mean structural similarity (Gaussian 11x11 window, sigma 1.5, K1=0.01, K2=0.03),
    averaged over `channels`. Images smaller than 11x11 fall back to a 1 - normalised MSE."""
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch {a.shape} vs {b.shape}")
    a3 = a.reshape(a.shape[0], a.shape[1], -1).astype(np.float64)
    b3 = b.reshape(b.shape[0], b.shape[1], -1).astype(np.float64)
    chans = list(channels) if channels is not None else list(range(a3.shape[2]))
    if a3.shape[0] < 11 or a3.shape[1] < 11:
        return float(1.0 - np.mean((a3[..., chans] - b3[..., chans]) ** 2) / (peak * peak))
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    scores = []
    for c in chans:
        x, y = a3[..., c], b3[..., c]
        mx, my = _gaussian_blur(x), _gaussian_blur(y)
        sxx = _gaussian_blur(x * x) - mx * mx
        syy = _gaussian_blur(y * y) - my * my
        sxy = _gaussian_blur(x * y) - mx * my
        num = (2 * mx * my + c1) * (2 * sxy + c2)
        den = (mx * mx + my * my + c1) * (sxx + syy + c2)
        scores.append(float(np.mean(num / den)))
    return float(np.mean(scores))
