"""Image quality of an upscale against the native render: PSNR over RGB, SSIM on luma.

PSNR and the Gaussian-window SSIM already live in `engine.textures.quality` (the bake table
uses them); this module fixes the conventions the upscaler is judged by, so every number in
the resolution report means the same thing:
  * PSNR over the three colour channels of uint8 images (alpha is not shown, not scored);
  * SSIM on luma, as Wang et al. defined it for colour images: structure is a luma property,
    and per-channel SSIM would triple-count chroma-free edges.
"""
from __future__ import annotations

import numpy as np

from ..textures import quality as _q

#: Rec.601 luma weights (what the SSIM literature computes Y with).
_LUMA = np.array([0.299, 0.587, 0.114])


def _rgb(img: np.ndarray) -> np.ndarray:
    if img.ndim != 3 or img.shape[2] < 3:
        raise ValueError(f"need an (H, W, 3+) image, got shape {img.shape}")
    return img[..., :3]


def luma(img: np.ndarray) -> np.ndarray:
    """(H, W, 1) float64 Rec.601 luma of an RGB(A) image, same value range as the input."""
    return (_rgb(img).astype(np.float64) @ _LUMA)[..., None]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two uint8 RGB(A) images over R, G and B (inf when identical)."""
    return _q.psnr(_rgb(a), _rgb(b))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of the luma of two uint8 RGB(A) images (11x11 Gaussian window, sigma 1.5,
    K1 = 0.01, K2 = 0.03, separable convolution, valid region)."""
    return _q.ssim(luma(a), luma(b))
