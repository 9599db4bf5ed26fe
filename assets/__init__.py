"""The repository's sample assets (photographs, the Khronos BoxTextured model), installed as
the package `engine.assets` (see setup.py), so demos and benches find them from a checkout, an
editable install and a wheel alike."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
PHOTOS = ROOT / "photos"
MODELS = ROOT / "models"
