"""Images for the viewer's tests: real files of many kinds, each with four coloured corner
markers (red top-left, green top-right, blue bottom-left, yellow bottom-right) so a
screenshot shows whether it is upright and where its corners are."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

CORNERS = {"tl": (255, 0, 0), "tr": (0, 255, 0), "bl": (0, 0, 255), "br": (255, 255, 0)}


def marked(w: int, h: int, fine: bool = False) -> np.ndarray:
    """(h, w, 3) grey image with corner markers a quarter of the short side; `fine` adds a
    one-pixel checkerboard in the middle (detail only full resolution shows)."""
    a = np.full((h, w, 3), 128, np.uint8)
    if fine:
        yy, xx = np.mgrid[0:h, 0:w]
        a[((yy + xx) % 2 == 0)] = (40, 40, 40)
    q = max(2, min(w, h) // 4)
    a[:q, :q] = CORNERS["tl"]
    a[:q, -q:] = CORNERS["tr"]
    a[-q:, :q] = CORNERS["bl"]
    a[-q:, -q:] = CORNERS["br"]
    return a


def write_mixed(folder: Path) -> dict[str, tuple[int, int]]:
    """A folder of mixed real files; name -> upright (width, height). Also a broken file
    (broken.jpg) and a subfolder, which a walk must enter."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    sub = folder / "sub"
    sub.mkdir(exist_ok=True)
    sizes = {}

    def save(name: str, im: Image.Image, size: tuple[int, int], **kw) -> None:
        im.save(folder / name, **kw)
        sizes[name] = size

    save("a.jpg", Image.fromarray(marked(200, 150)), (200, 150), quality=95)
    save("b.png", Image.fromarray(marked(150, 200)), (150, 200))
    save("c_cmyk.jpg", Image.fromarray(marked(160, 120)).convert("CMYK"), (160, 120),
         quality=95)
    save("d.webp", Image.fromarray(marked(128, 128)), (128, 128), lossless=True)
    save("e.gif", Image.fromarray(marked(100, 150)).convert("P", palette=Image.Palette.ADAPTIVE),
         (100, 150))
    save("f.bmp", Image.fromarray(marked(150, 100)), (150, 100))
    save("g.tif", Image.fromarray(marked(150, 100)), (150, 100))
    rgba = np.dstack([marked(120, 80), np.full((80, 120), 255, np.uint8)])
    save("h_rgba.png", Image.fromarray(rgba), (120, 80))
    up = Image.fromarray(marked(200, 150))
    exif = Image.Exif()
    exif[0x0112] = 6  # stored turned; upright it is `up`
    save("i_rot6.jpg", up.transpose(Image.Transpose.ROTATE_90), (200, 150),
         exif=exif.tobytes(), quality=95)
    Image.fromarray(marked(180, 120)).save(sub / "j_sub.jpg", quality=95)
    sizes["sub/j_sub.jpg"] = (180, 120)
    convert = shutil.which("magick") or shutil.which("convert")
    if convert:
        png = folder / "k_src.png"
        Image.fromarray(marked(160, 100)).save(png)
        done = subprocess.run([convert, str(png), "-depth", "16", str(folder / "k16.tif")],
                              capture_output=True, check=False)
        png.unlink()
        if done.returncode == 0:
            sizes["k16.tif"] = (160, 100)
    from engine.view.cache import encode_chain

    rgba = np.dstack([marked(128, 64), np.full((64, 128), 255, np.uint8)])
    encode_chain(rgba, "bc1", folder / "l_texture.ktx2")  # shown as it is, no thumbnail
    sizes["l_texture.ktx2"] = (128, 64)
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    return sizes


def screen_of(nav, rect, size: tuple[int, int], fx: float, fy: float) -> tuple[int, int]:
    """Output pixel (x, y from the top) of the point at fractions (fx, fy) of a world rect
    (fy from its top), as the navigator's camera shows it."""
    v = nav.view_rect()
    wx = rect.x0 + fx * rect.width
    wy = rect.y1 - fy * rect.height
    w, h = size
    return (int((wx - v.x0) / (v.x1 - v.x0) * w), int((v.y1 - wy) / (v.y1 - v.y0) * h))


def corners_match(image: np.ndarray, nav, rect, tol: int = 60) -> list[str]:
    """The corner markers of `rect` that are not where they should be in `image`."""
    size = (image.shape[1], image.shape[0])
    wrong = []
    for name, (fx, fy) in {"tl": (0.08, 0.08), "tr": (0.92, 0.08), "bl": (0.08, 0.92),
                           "br": (0.92, 0.92)}.items():
        x, y = screen_of(nav, rect, size, fx, fy)
        got = image[y, x, :3].astype(int)
        if np.abs(got - np.array(CORNERS[name])).max() > tol:
            wrong.append(f"{name} at ({x}, {y}): {tuple(got)}")
    return wrong


def jpeg_with_thumbnail(path: Path, image: np.ndarray, thumb: np.ndarray,
                        orientation: int = 1) -> None:
    """Write `image` as a JPEG whose APP1 (EXIF) holds `thumb` as its IFD1 thumbnail, as a
    camera writes it (Pillow writes no thumbnail itself): a little-endian TIFF header, IFD0
    with the orientation, IFD1 with JPEGInterchangeFormat and its length."""
    import io
    import struct

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(thumb).save(buf, "JPEG", quality=95)
    jpeg = buf.getvalue()
    entry = struct.Struct("<HHII")
    ifd0 = 8
    ifd1 = ifd0 + 2 + entry.size + 4
    data = ifd1 + 2 + 3 * entry.size + 4
    tiff = b"II*\x00" + struct.pack("<I", ifd0)
    tiff += struct.pack("<H", 1) + struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
    tiff += struct.pack("<I", ifd1)
    tiff += struct.pack("<H", 3) + entry.pack(0x0103, 3, 1, 6) + \
        entry.pack(0x0201, 4, 1, data) + entry.pack(0x0202, 4, 1, len(jpeg)) + \
        struct.pack("<I", 0)
    Image.fromarray(image).save(path, "JPEG", quality=95, exif=b"Exif\x00\x00" + tiff + jpeg)
