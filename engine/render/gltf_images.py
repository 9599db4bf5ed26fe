"""A glTF image as a texture file a provider can stream: why and how it is baked on load.

Providers read single mip levels from files, so every image reaches them as KTX2 or DDS:
PNG/JPEG images are baked to BC7 once and cached under the engine cache directory by a hash
of their bytes (a re-import costs a file check); KTX2/DDS images on disk are used as they
are, embedded ones are written out to the cache once.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np

from ..errors import GltfError
from .gltf import GltfImage

BAKE_VERSION = 1  # part of the cache key: bump when baking changes what it writes


def gltf_cache_dir() -> Path:
    from ..textures.cachedir import cache_root
    return cache_root() / "gltf"


def image_ktx2(image: GltfImage, *, srgb: bool, normal_map: bool = False,
               cache_dir: Path | None = None) -> Path:
    """A texture file (KTX2 or DDS) with the image's pixels: the file itself for external
    KTX2/DDS images, else a cached one (PNG/JPEG baked to BC7, embedded KTX2/DDS written
    out), named by content hash."""
    stored = image.mime_type in ("image/ktx2", "image/vnd-ms.dds")
    if stored and image.source_path is not None:
        return image.source_path
    directory = cache_dir or gltf_cache_dir()
    suffix = ".dds" if image.mime_type == "image/vnd-ms.dds" else ".ktx2"
    kind = "stored" if stored else \
        f"bc7-{'srgb' if srgb else 'linear'}-{'n' if normal_map else 'c'}-v{BAKE_VERSION}"
    digest = hashlib.sha256(image.data).hexdigest()[:32]
    out = directory / f"{digest}-{kind}{suffix}"
    if out.is_file():
        return out
    directory.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{id(image)}")
    if stored:
        tmp.write_bytes(image.data)
    else:
        from ..textures.bake import bake_image
        bake_image(decode_image(image), tmp, "bc7", srgb, normal_map=normal_map,
                   source=image.name)
    tmp.replace(out)  # atomic: a concurrent or interrupted import never sees half a file
    return out


def decode_image(image: GltfImage) -> np.ndarray:
    """A PNG/JPEG image's pixels as (H, W, 4) uint8 RGBA."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(image.data)) as im:
            return np.asarray(im.convert("RGBA"), np.uint8).copy()
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise GltfError(image.name, f"cannot decode {image.mime_type}: {exc}") from exc
