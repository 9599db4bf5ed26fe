"""Data for the viewer's benchmarks (benchmarks/device_view.sh): N distinct phone-sized
JPEGs and a large strip image, generated cheaply (one encoded photograph-like JPEG, its
copies made distinct by a changed comment, so each is its own cache entry).

    python -m lab.view_data photos OUT_DIR COUNT WIDTH HEIGHT [THUMB_EVERY]
    python -m lab.view_data huge OUT_FILE.png EDGE
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def photos(out: Path, count: int, width: int, height: int, thumb_every: int = 0
           ) -> list[Path]:
    """`count` JPEGs; with `thumb_every` K, every K-th one carries an EXIF thumbnail of at
    most 160 pixels a side (as a camera writes one), whose mean colour its placeholder
    shows."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    small = rng.integers(0, 255, (max(1, height // 16), max(1, width // 16), 3), np.uint8)
    picture = np.asarray(Image.fromarray(small).resize((width, height),
                                                       Image.Resampling.BICUBIC))
    first = out / "p00000.jpg"
    Image.fromarray(picture).save(first, quality=85)
    plain = first.read_bytes()
    thumbed = plain
    if thumb_every:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from view_helpers import jpeg_with_thumbnail

        step = -(-max(width, height) // 160)
        jpeg_with_thumbnail(first, picture, np.ascontiguousarray(picture[::step, ::step]))
        thumbed = first.read_bytes()
    paths = []
    for i in range(count):
        p = out / f"p{i:05d}.jpg"
        data = thumbed if thumb_every and i % thumb_every == 0 else plain
        # a JPEG comment segment after SOI: same picture, different bytes
        note = f"copy {i}".encode()
        p.write_bytes(data[:2] + b"\xff\xfe" + (len(note) + 2).to_bytes(2, "big") + note
                      + data[2:])
        paths.append(p)
    return paths


def huge(out: Path, edge: int) -> Path:
    """An edge x edge PNG with corner markers, written by rows (PNG's encoder streams)."""
    from PIL import Image

    yy, xx = np.mgrid[0:256, 0:256]
    tile = np.stack([xx, yy, (xx ^ yy) & 255], -1).astype(np.uint8)
    reps = -(-edge // 256)
    im = np.tile(tile, (reps, reps, 1))[:edge, :edge]
    q = edge // 8
    im[:q, :q] = (255, 0, 0)
    im[:q, -q:] = (0, 255, 0)
    im[-q:, :q] = (0, 0, 255)
    im[-q:, -q:] = (255, 255, 0)
    Image.fromarray(im).save(out, compress_level=1)
    return out


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "photos":
        photos(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
               int(sys.argv[6]) if len(sys.argv) > 6 else 0)
    elif kind == "huge":
        huge(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown kind {kind!r}: photos or huge")
