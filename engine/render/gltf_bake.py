"""`engine bake scene.gltf -o out/`: a copy of a glTF scene whose textures are KTX2.

Why a copy and not an in-place edit: the original stays the fallback. Every texture keeps
its core `source` (the PNG/JPEG, copied beside the new file) and gains an extension pointing
at the baked KTX2, so viewers that know the extension use the KTX2 and the others still
draw the PNG. That is how the glTF spec wants optional texture extensions used: listed in
`extensionsUsed`, and in `extensionsRequired` only when no fallback exists.

Two outputs:
- `bc7` (default, for this engine): BC7 KTX2 under ENGINE_texture_ktx2_bcn (the engine's
  own extension: no ratified glTF extension carries BCn KTX2).
- `uastc` / `etc1s` (for other viewers): Basis Universal KTX2 under KHR_texture_basisu,
  which three.js, Babylon.js and glTF-Transform read.

Colour space per image follows its use: base colour and emissive are sRGB; normal maps
are baked as unit vectors; metallic-roughness and occlusion are linear data. The output is
always a .gltf with the buffers as .bin files beside it (a .glb input is unpacked).
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..textures.bake import BakeResult, bake_image
from .gltf import (
    ENGINE_KTX2,
    KHR_BASISU,
    GltfImage,
    _Reader,
    read_document,
    sniff_mime,
)
from .gltf_images import decode_image

log = logging.getLogger(__name__)

FORMATS = ("bc7", "uastc", "etc1s")


@dataclass(frozen=True)
class GltfBakeResult:
    """The written .gltf and one bake result per KTX2 image made."""

    gltf: Path
    extension: str
    images: tuple[BakeResult, ...]


def _image_uses(doc: Any) -> dict[int, tuple[bool, bool]]:
    """image index -> (sRGB, normal map), from the material slots that sample it."""
    uses: dict[int, tuple[bool, bool]] = {}
    textures = doc.textures or []

    def note(info: Any, srgb: bool, normal: bool = False) -> None:
        index = getattr(info, "index", None)
        if isinstance(index, int) and 0 <= index < len(textures):
            source = textures[index].source
            if isinstance(source, int):
                uses.setdefault(source, (srgb, normal))

    for m in doc.materials or []:
        pbr = m.pbrMetallicRoughness
        if pbr is not None:
            note(pbr.baseColorTexture, True)
            note(pbr.metallicRoughnessTexture, False)
        note(m.emissiveTexture, True)
        note(m.normalTexture, False, True)
        note(m.occlusionTexture, False)
    return uses


def bake_gltf(src: str | Path, out_dir: str | Path, fmt: str = "bc7", *,
              zstd_level: int | None = None) -> GltfBakeResult:
    """Write `out_dir/<stem>.gltf`: the scene of `src` with every PNG/JPEG texture also
    baked to KTX2 (`fmt` bc7, uastc or etc1s) and referenced through the extension."""
    import pygltflib

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"unknown glTF bake format {fmt!r}; choose from {', '.join(FORMATS)}")
    src, out = Path(src), Path(out_dir)
    if out.resolve() == src.parent.resolve():
        raise ValueError("the output folder must differ from the model's folder")
    out.mkdir(parents=True, exist_ok=True)
    doc, glb_bin = read_document(src)
    r = _Reader(src, doc, glb_bin)
    stem = src.stem
    extension = ENGINE_KTX2 if fmt == "bc7" else KHR_BASISU

    # Buffers: every one becomes a .bin file beside the .gltf.
    for i, buf in enumerate(doc.buffers or []):
        name = f"{stem}.bin" if i == 0 else f"{stem}_{i}.bin"
        (out / name).write_bytes(r.buffer(i))
        buf.uri = name
    # Images: external files are copied (they stay the fallback); embedded ones stay embedded.
    for i, im in enumerate(doc.images or []):
        if isinstance(im.uri, str) and not im.uri.startswith("data:"):
            data, path = r.uri_bytes(im.uri, f"images[{i}]")
            target = out / unquote(im.uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path is not None:
                shutil.copyfile(path, target)
            else:
                target.write_bytes(data)

    uses = _image_uses(doc)
    baked: dict[int, int] = {}  # source image -> new KTX2 image index
    results: list[BakeResult] = []
    images = doc.images or []
    for ti, tex in enumerate(doc.textures or []):
        source = tex.source
        if not isinstance(source, int) or not 0 <= source < len(images):
            continue
        if source not in baked:
            im = images[source]
            data = r.uri_bytes(im.uri, f"images[{source}]")[0] if im.uri is not None else \
                bytes(r.view(im.bufferView)[0]) if im.bufferView is not None else b""
            mime = sniff_mime(data)
            if mime not in ("image/png", "image/jpeg"):
                log.info("%s: texture %d: image %d is %s, left as it is", src.name, ti, source,
                         mime)
                continue
            srgb, normal = uses.get(source, (True, False))
            name = f"{stem}_image{source}.ktx2"
            rgba = decode_image(GltfImage(str(im.name or name), mime, data))
            results.append(bake_image(rgba, out / name, fmt, srgb and not normal,
                                      zstd_level, normal_map=normal, source=name))
            images.append(pygltflib.Image(uri=name, mimeType="image/ktx2"))
            baked[source] = len(images) - 1
        exts = dict(tex.extensions or {})
        exts[extension] = {"source": baked[source]}
        tex.extensions = exts
    doc.images = images
    used = list(doc.extensionsUsed or [])
    if baked and extension not in used:
        used.append(extension)
    doc.extensionsUsed = used
    # Every texture keeps its PNG/JPEG `source`, so the extension stays optional.
    path = out / f"{stem}.gltf"
    tmp = path.with_suffix(".gltf.tmp")
    tmp.write_text(doc.gltf_to_json())
    tmp.replace(path)
    log.info("baked %s -> %s: %d image(s) to %s KTX2 (%s)", src, path, len(results),
             fmt.upper(), extension)
    return GltfBakeResult(path, extension, tuple(results))
