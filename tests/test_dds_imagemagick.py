"""DDS files written by ImageMagick itself (not crafted headers): DXT1, DXT5 with mips and
uncompressed BGRA. Skips where ImageMagick is not installed (.ci/run installs it)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import engine.textures

ROOT = Path(__file__).resolve().parents[1]
PHOTO = ROOT / "assets" / "photos" / "chelsea.jpg"


def _convert() -> str:
    exe = shutil.which("convert-im6.q16") or shutil.which("magick")
    if exe is None:
        pytest.skip("ImageMagick is not installed")
    return exe


def _write(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / f"{name}.dds"
    subprocess.run([_convert(), str(PHOTO), "-resize", "64x64!", *args, str(out)], check=True,
                   capture_output=True, timeout=60)
    return out


@pytest.mark.parametrize("name,args,fmt,levels", [
    ("dxt1", ("-define", "dds:compression=dxt1", "-define", "dds:mipmaps=4"), "BC1_RGBA", 5),
    ("dxt5", ("-alpha", "on", "-define", "dds:compression=dxt5", "-define", "dds:mipmaps=4"),
     "BC3", 5),
    ("bgra", ("-alpha", "on", "-define", "dds:compression=none", "-define", "dds:mipmaps=0"),
     "BGRA8", 1),
])
def test_imagemagick_dds_reads_and_decodes(tmp_path, name, args, fmt, levels):
    path = _write(tmp_path, name, *args)
    tex = engine.textures.open(path)
    assert (tex.format, tex.width, tex.height, len(tex.levels)) == (fmt, 64, 64, levels)
    ours = engine.textures.decode_rgba(tex, 0)
    pillow = np.asarray(Image.open(path).convert("RGBA"))
    # Pillow's BCn decoder rounds the palette differently from the GPU (ours): within 2.
    assert np.abs(ours.astype(int) - pillow).max() <= (0 if fmt == "BGRA8" else 2)
    for level in range(1, levels):
        assert len(tex.read_level(level)) == tex.levels[level].nbytes


def test_imagemagick_24bit_rgb_reads_as_rgba8(tmp_path):
    """ImageMagick's uncompressed file without alpha is 24-bit BGR: repacked on read to RGBA8
    (tests/test_dds_layouts.py covers it and the other layouts in full)."""
    path = _write(tmp_path, "rgb", "-alpha", "off", "-define", "dds:compression=none")
    tex = engine.textures.open(path)
    assert tex.format == "RGBA8" and tex.levels[0].stored_nbytes == 64 * 64 * 3
    pillow = np.asarray(Image.open(path).convert("RGBA"))
    np.testing.assert_array_equal(engine.textures.decode_rgba(tex, 0), pillow)
