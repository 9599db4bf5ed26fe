"""Image comparison for rendering tests, with Filament's criterion.

Software rasterizers and drivers differ by a code value here and there (rounding, derivative
approximations); a render test should fail on a wrong picture, not on that. Filament's rule on
Mesa: pass when at most 0.1% of pixels differ by more than 5/255 in any channel.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class CompareResult:
    ok: bool
    differing_pixels: int
    total_pixels: int
    max_difference: int
    tolerance: int
    max_fraction: float

    @property
    def fraction(self) -> float:
        return self.differing_pixels / max(self.total_pixels, 1)

    def __str__(self) -> str:
        return (f"{'match' if self.ok else 'MISMATCH'}: {self.differing_pixels}/"
                f"{self.total_pixels} pixels ({self.fraction:.4%}) differ by more than "
                f"{self.tolerance} (allowed {self.max_fraction:.3%}); max difference "
                f"{self.max_difference}")


def compare(a: np.ndarray, b: np.ndarray, tol: int = 5,
            max_fraction: float = 0.001) -> CompareResult:
    """Compare two (H, W, C) uint8 images. Different shapes never match."""
    if a.shape != b.shape:
        n = int(np.prod(a.shape[:2]))
        return CompareResult(False, n, n, 255, tol, max_fraction)
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    per_pixel = diff.max(axis=-1) if diff.ndim == 3 else diff
    bad = int((per_pixel > tol).sum())
    total = int(per_pixel.size)
    return CompareResult(bad <= max_fraction * total, bad, total, int(diff.max(initial=0)), tol,
                         max_fraction)


def diff_image(a: np.ndarray, b: np.ndarray, tol: int = 5) -> np.ndarray:
    """Red where pixels differ by more than `tol`, the darkened image elsewhere: for the
    artefact a failing test leaves behind."""
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=-1)
    out = (a[..., :3] // 3).astype(np.uint8)
    out[diff > tol] = (255, 0, 0)
    return out


def save_png(image: np.ndarray, path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)


def load_png(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))
