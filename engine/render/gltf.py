"""glTF 2.0 loader: .gltf (external files or data: URIs) and .glb, into plain CPU data.

The file format itself (GLB chunks, JSON into typed objects) is read by pygltflib, the
maintained glTF library; this module turns its objects into the engine's data: numpy
geometry as the renderer's own `MeshData`, materials as factors plus image indices and a
UV transform, and the node hierarchy flattened into world-space instances. No GL is
touched, so loading can happen anywhere and tests need no context. `add_to_scene(asset,
scene, provider)` (gltf_scene.py) then makes the GPU meshes through the scene's device and
registers the images with the texture provider.

Texture extensions: a texture's image is taken, in order of preference, from the engine's
own BC7 KTX2 (ENGINE_texture_ktx2_bcn, written by `engine bake scene.gltf`), MSFT_texture_dds
(BCn DDS: uploaded as stored), KHR_texture_basisu (UASTC/ETC1S KTX2: transcoded per level by
engine.textures.basis when its extra is installed), and finally the core `source`
(PNG/JPEG). KHR_texture_transform's offset/rotation/scale become the material's 3x2 UV
transform (and its texCoord override is honoured for TEXCOORD_0 only).

Images reach the provider as texture files (KTX2 or DDS), because providers read single mip
levels from files (gltf_images.py bakes and caches those that are not).

Files are treated as hostile: pygltflib does not validate, so every index, offset and count
is checked against what exists, node graphs may not loop, and external URIs may not leave
the model's folder. Any problem is a `GltfError` naming the file and the field.
"""
from __future__ import annotations

import base64
import json
import logging
import math
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np

from ..errors import GltfError, UnsupportedGltfError
from ..textures.dds import MAGIC as DDS_MAGIC
from ..textures.ktx2 import IDENTIFIER as KTX2_IDENTIFIER
from .mesh import MeshData

if TYPE_CHECKING:
    import pygltflib

log = logging.getLogger(__name__)

_GLB_MAGIC = b"glTF"
_COMPONENTS = {5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16,
               5125: np.uint32, 5126: np.float32}
_TYPE_SIZES = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}
_TRIANGLES, _TRIANGLE_STRIP, _TRIANGLE_FAN = 4, 5, 6
_MAX_NODE_DEPTH = 256
KHR_BASISU = "KHR_texture_basisu"
MSFT_DDS = "MSFT_texture_dds"
KHR_TRANSFORM = "KHR_texture_transform"
#: The engine's own: a texture's BC7 (or other BCn) KTX2 image, beside a core `source`
#: fallback that other viewers use. Written by `engine bake scene.gltf` (gltf_bake.py).
ENGINE_KTX2 = "ENGINE_texture_ktx2_bcn"
# Extensions that change how geometry or images must be read: a file requiring one we do
# not implement cannot be shown correctly, so it is refused rather than drawn wrong.
_SUPPORTED_REQUIRED = {KHR_BASISU, MSFT_DDS, KHR_TRANSFORM, ENGINE_KTX2,
                       "KHR_materials_emissive_strength"}
# Top-level arrays of objects, checked before pygltflib sees them (it assumes their shape).
_ARRAYS = ("accessors", "animations", "buffers", "bufferViews", "cameras", "images",
           "materials", "meshes", "nodes", "samplers", "scenes", "skins", "textures")
#: Identity UV transform, row-major 2x3: u' = a*u + b*v + c, v' = d*u + e*v + f.
UV_IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


# ---------------------------------------------------------------------------- data model
@dataclass(frozen=True)
class GltfImage:
    """One image's encoded bytes (PNG, JPEG, KTX2 or DDS) and, for external files, their
    path (a KTX2/DDS file on disk is handed to the provider directly, without a copy)."""

    name: str
    mime_type: str
    data: bytes
    source_path: Path | None = None


@dataclass
class GltfMaterial:
    """pbrMetallicRoughness factors, image indices (None = no texture) and the UV transform
    (KHR_texture_transform of the base colour texture, else of the first transformed one)."""

    name: str = "material"
    base_color_factor: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    metallic_factor: float = 1.0
    roughness_factor: float = 1.0
    emissive_factor: tuple[float, float, float] = (0.0, 0.0, 0.0)
    normal_scale: float = 1.0
    base_color_image: int | None = None
    metallic_roughness_image: int | None = None
    normal_image: int | None = None
    uv_transform: tuple[float, float, float, float, float, float] = UV_IDENTITY


@dataclass
class GltfPrimitive:
    data: MeshData
    material: int | None  # index into GltfAsset.materials


@dataclass
class GltfMesh:
    name: str
    primitives: list[GltfPrimitive]


@dataclass(frozen=True)
class GltfInstance:
    """A mesh placed in the world: the node hierarchy multiplied out."""

    mesh: int
    world: np.ndarray  # (4, 4) float32, row-major (numpy convention)
    node: int


@dataclass
class GltfAsset:
    path: Path
    meshes: list[GltfMesh] = field(default_factory=list)
    materials: list[GltfMaterial] = field(default_factory=list)
    images: list[GltfImage] = field(default_factory=list)
    instances: list[GltfInstance] = field(default_factory=list)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """World-space axis-aligned box (lo, hi) of every instance: for framing a camera."""
        pts = []
        for inst in self.instances:
            for prim in self.meshes[inst.mesh].primitives:
                p = prim.data.positions
                h = np.hstack([p, np.ones((len(p), 1), np.float32)]) @ inst.world.T
                pts.append(h[:, :3])
        if not pts:
            return np.zeros(3, np.float32), np.zeros(3, np.float32)
        allp = np.vstack(pts)
        return allp.min(axis=0), allp.max(axis=0)


# ---------------------------------------------------------------------------- container
def read_document(path: Path) -> tuple[pygltflib.GLTF2, bytes | None]:
    """The file as pygltflib's typed document, and the GLB binary chunk if any.

    The GLB framing and the JSON's top-level shape are checked first, because pygltflib
    trusts both (a truncated chunk or `"nodes": "x"` would otherwise escape as a
    struct.error or AttributeError).

    pygltflib is imported here, not with the module: it and dataclasses_json/marshmallow
    cost ~40 ms at every start of the CLI, which imports this module for its demo list."""
    import pygltflib

    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise GltfError(path, f"cannot read ({exc.strerror})") from exc
    if blob[:4] == _GLB_MAGIC:
        _check_glb(path, blob)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pygltflib warns instead of failing
                doc = pygltflib.GLTF2.load_from_bytes(blob)
        except (ValueError, TypeError, AttributeError, KeyError, struct.error,
                UnicodeDecodeError) as exc:
            raise GltfError(path, f"GLB: {type(exc).__name__}: {exc}") from exc
        glb_bin = doc.binary_blob()
        _check_shape(path, doc.to_dict())
        return doc, glb_bin
    try:
        raw = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GltfError(path, f"JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise GltfError(path, "JSON: the top level is not an object")
    _check_shape(path, raw)
    try:
        with warnings.catch_warnings():  # dataclasses_json warns about every absent field
            warnings.simplefilter("ignore", RuntimeWarning)
            return pygltflib.GLTF2.from_json(json.dumps(raw)), None
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise GltfError(path, f"malformed structure ({type(exc).__name__}: {exc})") from exc


def _check_glb(path: Path, blob: bytes) -> None:
    if len(blob) < 20:
        raise GltfError(path, "GLB header: file too short")
    _magic, version, length = struct.unpack_from("<4sII", blob)
    if version != 2:
        raise UnsupportedGltfError(path, f"GLB header.version: {version} (only 2)")
    if length > len(blob):
        raise GltfError(path, f"GLB header.length: {length} but the file has {len(blob)} bytes")
    pos = 12
    while pos + 8 <= length:
        clen, _ = struct.unpack_from("<II", blob, pos)
        if pos + 8 + clen > length:
            raise GltfError(path, f"GLB chunk at {pos}: length {clen} runs past the end")
        pos += 8 + clen
    if length < 20 or struct.unpack_from("<I", blob, 16)[0] != 0x4E4F534A:
        raise GltfError(path, "GLB: no JSON chunk")


def _check_shape(path: Path, raw: dict[str, Any]) -> None:
    for kind in _ARRAYS:
        items = raw.get(kind)
        if items is not None and (not isinstance(items, list)
                                  or not all(isinstance(x, dict) for x in items)):
            raise GltfError(path, f"{kind}: not a list of objects")
    version = raw.get("asset", {}).get("version", "") if isinstance(raw.get("asset"), dict) \
        else ""
    if not str(version).startswith("2."):
        raise UnsupportedGltfError(path, f"asset.version: {version or 'missing'} (only 2.x)")
    required = raw.get("extensionsRequired") or []
    if not isinstance(required, list):
        raise GltfError(path, "extensionsRequired: not a list")
    missing = set(map(str, required)) - _SUPPORTED_REQUIRED
    if missing:
        raise UnsupportedGltfError(path, f"extensionsRequired: {', '.join(sorted(missing))}")


# ---------------------------------------------------------------------------- parsing
class _Reader:
    """Parsing state of one file: the typed document, the loaded buffers, the path."""

    def __init__(self, path: Path, doc: pygltflib.GLTF2, glb_bin: bytes | None) -> None:
        self.path = path
        self.doc = doc
        self.glb_bin = glb_bin
        self._buffers: dict[int, bytes] = {}

    def fail(self, problem: str) -> GltfError:
        return GltfError(self.path, problem)

    def item(self, kind: str, index: Any) -> Any:
        items = getattr(self.doc, kind, None) or []
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(items):
            raise self.fail(f"{kind}[{index!r}]: no such entry")
        return items[index]

    def uri_bytes(self, uri: Any, what: str) -> tuple[bytes, Path | None]:
        return uri_bytes(self.path, uri, what)

    def buffer(self, index: int) -> bytes:
        if index not in self._buffers:
            b = self.item("buffers", index)
            if b.uri is not None:
                data, _ = self.uri_bytes(b.uri, f"buffers[{index}]")
            elif self.glb_bin is not None and index == 0:
                data = self.glb_bin
            else:
                raise self.fail(f"buffers[{index}]: no uri and no GLB binary chunk")
            length = b.byteLength
            if not isinstance(length, int) or length < 0 or length > len(data):
                raise self.fail(f"buffers[{index}].byteLength: {length!r} but "
                                f"{len(data)} bytes exist")
            self._buffers[index] = data[:length]
        return self._buffers[index]

    def view(self, index: int) -> tuple[memoryview, int | None]:
        """(bytes of bufferView `index`, its byteStride or None)."""
        v = self.item("bufferViews", index)
        data = self.buffer(v.buffer)
        off, length = v.byteOffset or 0, v.byteLength
        if not all(isinstance(x, int) and x >= 0 for x in (off, length)) \
                or off + length > len(data):
            raise self.fail(f"bufferViews[{index}]: range {off!r}+{length!r} outside buffer "
                            f"of {len(data)} bytes")
        stride = v.byteStride
        if stride is not None and (not isinstance(stride, int) or not 4 <= stride <= 252):
            raise self.fail(f"bufferViews[{index}].byteStride: {stride!r}")
        return memoryview(data)[off:off + length], stride

    def accessor(self, index: int) -> np.ndarray:
        """Accessor `index` as an (count, components) array; normalized integers become
        float32 in [0, 1] or [-1, 1] as the spec says."""
        a = self.item("accessors", index)
        what = f"accessors[{index}]"
        if a.sparse is not None:
            raise UnsupportedGltfError(self.path, f"{what}: sparse accessors")
        dtype = _COMPONENTS.get(a.componentType)
        n = _TYPE_SIZES.get(a.type)
        count = a.count
        if dtype is None or n is None or not isinstance(count, int) or count < 0:
            raise self.fail(f"{what}: componentType {a.componentType!r}, type "
                            f"{a.type!r}, count {count!r}")
        dt = np.dtype(dtype).newbyteorder("<")
        if a.bufferView is None:
            return np.zeros((count, n), dt)  # the spec: all zeros (sparse would fill them)
        view, stride = self.view(a.bufferView)
        off = a.byteOffset or 0
        elem = dt.itemsize * n
        stride = stride or elem
        if not isinstance(off, int) or off < 0 or off % dt.itemsize or stride < elem:
            raise self.fail(f"{what}: byteOffset {off!r} / stride {stride} for {elem}-byte "
                            "elements")
        if count and off + stride * (count - 1) + elem > len(view):
            raise self.fail(f"{what}: {count} elements do not fit in bufferView "
                            f"{a.bufferView} ({len(view)} bytes)")
        raw = np.frombuffer(view, np.uint8)
        arr = np.ndarray((count, n), dt, raw, off, (stride, dt.itemsize)) if count \
            else np.zeros((0, n), dt)
        if a.normalized:
            if dtype == np.float32 or dtype == np.uint32:
                raise self.fail(f"{what}: normalized {np.dtype(dtype).name} is not allowed")
            info = np.iinfo(dtype)
            return np.maximum(arr.astype(np.float32) / info.max, -1.0)
        return arr.copy()


def uri_bytes(path: Path, uri: Any, what: str) -> tuple[bytes, Path | None]:
    """Bytes behind a buffer or image URI of the model at `path`: base64 data: URIs, or
    files inside the model's folder (never outside it, never remote)."""
    if not isinstance(uri, str):
        raise GltfError(path, f"{what}.uri: not a string")
    if uri.startswith("data:"):
        head, _, payload = uri.partition(",")
        if not head.endswith(";base64"):
            raise GltfError(path, f"{what}.uri: only base64 data: URIs are supported")
        try:
            return base64.b64decode(payload, validate=True), None
        except ValueError as exc:
            raise GltfError(path, f"{what}.uri: bad base64 ({exc})") from exc
    if "://" in uri:
        raise UnsupportedGltfError(path, f"{what}.uri: remote URI {uri!r}")
    base = path.parent.resolve()
    target = (base / unquote(uri)).resolve()
    if not target.is_relative_to(base):
        raise GltfError(path, f"{what}.uri: {uri!r} points outside the model's folder")
    try:
        return target.read_bytes(), target
    except OSError as exc:
        raise GltfError(path, f"{what}.uri: cannot read {uri!r} ({exc.strerror})") from exc


# ---------------------------------------------------------------------------- meshes
def _triangles(indices: np.ndarray, mode: int) -> np.ndarray:
    """Triangle-list indices from list, strip or fan indices."""
    if mode == _TRIANGLES:
        return indices[: len(indices) // 3 * 3]
    if len(indices) < 3:
        return np.zeros(0, np.uint32)
    k = np.arange(len(indices) - 2)
    if mode == _TRIANGLE_FAN:
        return np.stack([indices[np.zeros_like(k)], indices[k + 1], indices[k + 2]],
                        axis=1).ravel()
    odd = (k % 2).astype(bool)  # strips alternate winding: swap the first two of odd ones
    a = np.where(odd, indices[k + 1], indices[k])
    b = np.where(odd, indices[k], indices[k + 1])
    return np.stack([a, b, indices[k + 2]], axis=1).ravel()


def _flat_normals(pos: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Area-weighted vertex normals for primitives without NORMAL (the spec asks for flat;
    smooth averages over shared vertices are the closest indexed geometry allows)."""
    tri = idx.reshape(-1, 3)
    fn = np.cross(pos[tri[:, 1]] - pos[tri[:, 0]], pos[tri[:, 2]] - pos[tri[:, 0]])
    out = np.zeros_like(pos, dtype=np.float64)
    for k in range(3):
        np.add.at(out, tri[:, k], fn)
    length = np.linalg.norm(out, axis=1, keepdims=True)
    return np.where(length > 1e-20, out / np.maximum(length, 1e-20), [0.0, 0.0, 1.0]).astype(
        np.float32)


def _primitive(r: _Reader, mi: int, pi: int, p: pygltflib.Primitive) -> GltfPrimitive | None:
    what = f"meshes[{mi}].primitives[{pi}]"
    mode = _TRIANGLES if p.mode is None else p.mode
    if mode not in (_TRIANGLES, _TRIANGLE_STRIP, _TRIANGLE_FAN):
        log.warning("%s: %s: mode %s (points/lines) is not drawn", r.path, what, mode)
        return None
    if "KHR_draco_mesh_compression" in (p.extensions or {}):
        raise UnsupportedGltfError(r.path, f"{what}: Draco compression")
    attrs = p.attributes
    if attrs is None or getattr(attrs, "POSITION", None) is None:
        raise r.fail(f"{what}.attributes: no POSITION")
    pos = r.accessor(attrs.POSITION).astype(np.float32)
    if pos.shape[1] != 3:
        raise r.fail(f"{what}: POSITION is not VEC3")
    n = len(pos)

    def attr(name: str, width: int) -> np.ndarray | None:
        index = getattr(attrs, name, None)
        if index is None:
            return None
        arr = r.accessor(index)
        if arr.shape != (n, width):
            raise r.fail(f"{what}.attributes.{name}: shape {arr.shape}, expected ({n}, {width})")
        return arr.astype(np.float32)

    if p.indices is not None:
        idx = r.accessor(p.indices)
        if idx.shape[1] != 1 or idx.dtype.kind != "u":
            raise r.fail(f"{what}.indices: must be unsigned SCALAR")
        idx = idx.ravel().astype(np.uint32)
    else:
        idx = np.arange(n, dtype=np.uint32)
    if len(idx) and int(idx.max()) >= n:
        raise r.fail(f"{what}.indices: index {int(idx.max())} >= vertex count {n}")
    idx = _triangles(idx, mode).astype(np.uint32)
    normals = attr("NORMAL", 3)
    uvs = attr("TEXCOORD_0", 2)
    tangents = attr("TANGENT", 4)
    data = MeshData(pos, normals if normals is not None else _flat_normals(pos, idx),
                    uvs if uvs is not None else np.zeros((n, 2), np.float32), idx, tangents)
    if p.material is not None:
        r.item("materials", p.material)
    return GltfPrimitive(data, p.material)


def _meshes(r: _Reader) -> list[GltfMesh]:
    out = []
    for mi, m in enumerate(r.doc.meshes or []):
        prims = m.primitives
        if not isinstance(prims, list):
            raise r.fail(f"meshes[{mi}].primitives: not a list")
        made = [_primitive(r, mi, pi, p) for pi, p in enumerate(prims)]
        out.append(GltfMesh(str(m.name or f"mesh{mi}"), [x for x in made if x]))
    return out


# ---------------------------------------------------------------------------- materials
def _ext(obj: Any, name: str) -> dict[str, Any] | None:
    """`obj.extensions[name]` when it is an object, else None."""
    exts = getattr(obj, "extensions", None)
    value = exts.get(name) if isinstance(exts, dict) else None
    return value if isinstance(value, dict) else None


def texture_image(r: _Reader, index: Any, what: str) -> int | None:
    """The image a texture draws from, best first: the engine's BCn KTX2, a DDS
    (MSFT_texture_dds), a Basis KTX2 (KHR_texture_basisu, when the transcoder is installed),
    then the core source (PNG/JPEG). A Basis-only texture without the transcoder still
    returns its KTX2, which the provider then refuses with a clear UnsupportedFormatError."""
    from ..textures import basis

    tex = r.item("textures", index)
    order = [ENGINE_KTX2, MSFT_DDS] + ([KHR_BASISU] if basis.available() else [])
    for name in order:
        ext = _ext(tex, name)
        if ext is not None and ext.get("source") is not None:
            r.item("images", ext["source"])
            return ext["source"]
    source = tex.source
    if source is None:
        ext = _ext(tex, KHR_BASISU)
        source = ext.get("source") if ext else None
    if source is None:
        return None
    r.item("images", source)
    return source


def uv_transform(r: _Reader, ext: dict[str, Any], what: str) -> tuple[float, ...]:
    """KHR_texture_transform as a row-major 2x3 matrix T * R * S (the spec's order):
    u' = a u + b v + c, v' = d u + e v + f. Rotation is counter-clockwise in UV space, so
    the spec's example (offset (0, 1), rotation pi/2, scale 0.5) maps the unit square onto
    the image's lower-left quadrant."""
    ox, oy = _floats(r, ext.get("offset"), 2, (0.0, 0.0), f"{what}.offset")
    sx, sy = _floats(r, ext.get("scale"), 2, (1.0, 1.0), f"{what}.scale")
    rot = ext.get("rotation", 0.0)
    if not isinstance(rot, (int, float)) or isinstance(rot, bool) or not math.isfinite(rot):
        raise r.fail(f"{what}.rotation: {rot!r}")
    c, s = math.cos(rot), math.sin(rot)
    return (c * sx, s * sy, ox, -s * sx, c * sy, oy)


def _texture_info(r: _Reader, info: Any, what: str
                  ) -> tuple[int | None, tuple[float, ...] | None]:
    """(image index, UV transform or None) of a material's textureInfo."""
    if info is None:
        return None, None
    image = texture_image(r, info.index, f"{what}.index")
    transform = None
    tex_coord = info.texCoord or 0
    ext = _ext(info, KHR_TRANSFORM)
    if ext is not None:
        transform = uv_transform(r, ext, f"{what}.extensions.{KHR_TRANSFORM}")
        tex_coord = ext.get("texCoord", tex_coord)
    if tex_coord != 0:
        log.warning("%s: %s uses TEXCOORD_%s; drawing with TEXCOORD_0", r.path, what, tex_coord)
    return image, transform


def _floats(r: _Reader, value: Any, n: int, default: tuple[float, ...], what: str
            ) -> tuple[float, ...]:
    if value is None:
        return default
    if not isinstance(value, list) or len(value) != n or \
            not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        raise r.fail(f"{what}: expected {n} numbers, got {value!r}")
    return tuple(float(x) for x in value)


def _number(r: _Reader, value: Any, default: float, what: str) -> float:
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise r.fail(f"{what}: expected a number, got {value!r}")
    return float(value)


def _materials(r: _Reader) -> list[GltfMaterial]:
    import pygltflib  # loaded by read_document already (see there)

    out = []
    for i, m in enumerate(r.doc.materials or []):
        w = f"materials[{i}]"
        pbr = m.pbrMetallicRoughness or pygltflib.PbrMetallicRoughness()
        base, base_t = _texture_info(r, pbr.baseColorTexture, f"{w}.baseColorTexture")
        mr, mr_t = _texture_info(r, pbr.metallicRoughnessTexture,
                                 f"{w}.metallicRoughnessTexture")
        normal, normal_t = _texture_info(r, m.normalTexture, f"{w}.normalTexture")
        transforms = [t for t in (base_t, mr_t, normal_t) if t is not None]
        if len(set(transforms)) > 1:
            log.warning("%s: %s: textures with different UV transforms; using the first",
                        r.path, w)
        out.append(GltfMaterial(
            name=str(m.name or f"material{i}"),
            base_color_factor=_floats(r, pbr.baseColorFactor, 4, (1.0, 1.0, 1.0, 1.0),
                                      f"{w}.baseColorFactor"),  # type: ignore[arg-type]
            metallic_factor=_number(r, pbr.metallicFactor, 1.0, f"{w}.metallicFactor"),
            roughness_factor=_number(r, pbr.roughnessFactor, 1.0, f"{w}.roughnessFactor"),
            emissive_factor=_floats(r, m.emissiveFactor, 3, (0.0, 0.0, 0.0),
                                    f"{w}.emissiveFactor"),  # type: ignore[arg-type]
            normal_scale=_number(r, getattr(m.normalTexture, "scale", None), 1.0,
                                 f"{w}.normalTexture.scale"),
            base_color_image=base, metallic_roughness_image=mr, normal_image=normal,
            uv_transform=transforms[0] if transforms else UV_IDENTITY))  # type: ignore[arg-type]
    return out


def sniff_mime(data: bytes) -> str | None:
    """The image type from its bytes: mimeType is often missing or wrong in real files."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(KTX2_IDENTIFIER):
        return "image/ktx2"
    if data.startswith(DDS_MAGIC):
        return "image/vnd-ms.dds"
    return None


def _images(r: _Reader) -> list[GltfImage]:
    out = []
    for i, im in enumerate(r.doc.images or []):
        w = f"images[{i}]"
        if im.uri is not None:
            data, src = r.uri_bytes(im.uri, w)
        elif im.bufferView is not None:
            data, src = bytes(r.view(im.bufferView)[0]), None
        else:
            raise r.fail(f"{w}: neither uri nor bufferView")
        mime = sniff_mime(data)
        if mime is None:
            raise UnsupportedGltfError(r.path, f"{w}: not PNG, JPEG, KTX2 or DDS "
                                               f"(declared {im.mimeType!r})")
        out.append(GltfImage(str(im.name or f"image{i}"), mime, data, src))
    return out


# ---------------------------------------------------------------------------- nodes
def _local_matrix(r: _Reader, node: pygltflib.Node, i: int) -> np.ndarray:
    if node.matrix is not None:
        m = _floats(r, node.matrix, 16, (), f"nodes[{i}].matrix")
        return np.array(m, np.float64).reshape(4, 4).T  # glTF is column-major
    t = _floats(r, node.translation, 3, (0.0, 0.0, 0.0), f"nodes[{i}].translation")
    x, y, z, w = _floats(r, node.rotation, 4, (0.0, 0.0, 0.0, 1.0), f"nodes[{i}].rotation")
    s = _floats(r, node.scale, 3, (1.0, 1.0, 1.0), f"nodes[{i}].scale")
    q = np.array([x, y, z, w]) / max(float(np.linalg.norm([x, y, z, w])), 1e-12)
    x, y, z, w = q
    rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                    [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                    [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    m = np.eye(4)
    m[:3, :3] = rot * np.array(s)[None, :]
    m[:3, 3] = t
    return m


def _instances(r: _Reader, mesh_count: int) -> list[GltfInstance]:
    nodes = r.doc.nodes or []
    if r.doc.scenes:
        scene = r.item("scenes", r.doc.scene if r.doc.scene is not None else 0)
        roots = scene.nodes or []
    else:  # no scenes: every node nobody points at is a root
        children = {c for n in nodes for c in (n.children or [])}
        roots = [i for i in range(len(nodes)) if i not in children]
    out: list[GltfInstance] = []
    stack = [(root, np.eye(4), frozenset()) for root in reversed(roots)]
    while stack:
        i, parent, path = stack.pop()
        node = r.item("nodes", i)
        if i in path or len(path) >= _MAX_NODE_DEPTH:
            raise r.fail(f"nodes[{i}]: the node graph loops or nests deeper than "
                         f"{_MAX_NODE_DEPTH}")
        world = parent @ _local_matrix(r, node, i)
        if node.mesh is not None:
            mesh = node.mesh
            if not isinstance(mesh, int) or not 0 <= mesh < mesh_count:
                raise r.fail(f"nodes[{i}].mesh: {mesh!r} of {mesh_count}")
            out.append(GltfInstance(mesh, world.astype(np.float32), i))
        children = node.children or []
        if not isinstance(children, list):
            raise r.fail(f"nodes[{i}].children: not a list")
        stack.extend((c, world, path | {i}) for c in reversed(children))
    return out


def load_gltf(path: str | Path) -> GltfAsset:
    """Parse a .gltf or .glb file (and its buffers and images) into CPU data."""
    path = Path(path)
    doc, glb_bin = read_document(path)
    r = _Reader(path, doc, glb_bin)
    try:
        meshes = _meshes(r)
        asset = GltfAsset(path, meshes, _materials(r), _images(r), _instances(r, len(meshes)))
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        if isinstance(exc, GltfError):
            raise
        # A field of the wrong JSON type deep in a structure: still the file's fault.
        raise GltfError(path, f"malformed structure ({type(exc).__name__}: {exc})") from exc
    log.info("loaded %s: %d meshes, %d materials, %d images, %d instances", path.name,
             len(asset.meshes), len(asset.materials), len(asset.images), len(asset.instances))
    return asset
