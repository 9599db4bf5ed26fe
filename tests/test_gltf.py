"""glTF loader: the bundled Khronos sample in its three packagings, hostile files, scene."""
from __future__ import annotations

import base64
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from texture_helpers import BOX_MODEL

from engine.render.gltf import GltfError, UnsupportedGltfError, _triangles, load_gltf
from engine.render.gltf_images import image_ktx2
from engine.render.gltf_scene import add_to_scene

MODEL = BOX_MODEL
pytestmark = pytest.mark.usefixtures("isolated_cache")


def _doc(**over) -> dict:
    """A one-triangle glTF with a data: URI buffer; `over` replaces top-level fields."""
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()
    idx = np.array([0, 1, 2, 0], np.uint16).tobytes()
    data = pos + idx
    doc = {"asset": {"version": "2.0"}, "scenes": [{"nodes": [0]}],
           "nodes": [{"mesh": 0, "translation": [1, 2, 3]}],
           "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
           "buffers": [{"byteLength": len(data), "uri": "data:application/octet-stream;base64,"
                        + base64.b64encode(data).decode()}],
           "bufferViews": [{"buffer": 0, "byteLength": 36}, {"buffer": 0, "byteOffset": 36,
                                                             "byteLength": 8}],
           "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3"},
                         {"bufferView": 1, "componentType": 5123, "count": 3,
                          "type": "SCALAR"}]}
    doc.update(over)
    return doc


def _write(tmp_path: Path, doc: dict, name: str = "m.gltf") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("name", ["BoxTextured.gltf", "BoxTextured.glb",
                                  "BoxTextured-embedded.gltf"])
def test_sample_model_packagings_agree(name):
    asset = load_gltf(MODEL / name)
    prim = asset.meshes[0].primitives[0]
    assert prim.data.positions.shape == (24, 3) and len(prim.data.indices) == 36
    assert asset.materials[0].base_color_image == 0 and asset.images[0].mime_type == "image/png"
    # The root node's matrix turns the COLLADA Z-up box to Y-up: a 90 degree turn about X.
    np.testing.assert_allclose(asset.instances[0].world[:3, :3],
                               [[1, 0, 0], [0, 0, 1], [0, -1, 0]], atol=1e-6)
    lo, hi = asset.bounds()
    np.testing.assert_allclose(hi - lo, [1, 1, 1], atol=1e-6)


def test_trs_and_minimal_file(tmp_path):
    asset = load_gltf(_write(tmp_path, _doc()))
    np.testing.assert_allclose(asset.instances[0].world[:3, 3], [1, 2, 3])
    data = asset.meshes[0].primitives[0].data
    np.testing.assert_allclose(data.normals, [[0, 0, 1]] * 3, atol=1e-6)  # made up: no NORMAL


def test_strip_and_fan_become_lists():
    idx = np.arange(5, dtype=np.uint32)
    assert _triangles(idx, 5).reshape(-1, 3).tolist() == [[0, 1, 2], [2, 1, 3], [2, 3, 4]]
    assert _triangles(idx, 6).reshape(-1, 3).tolist() == [[0, 1, 2], [0, 2, 3], [0, 3, 4]]


@pytest.mark.parametrize("over, field", [
    ({"asset": {"version": "1.0"}}, "asset.version"),
    ({"nodes": [{"mesh": 5}]}, "nodes[0].mesh"),
    ({"nodes": [{"children": [0]}]}, "loops"),
    ({"accessors": [{"bufferView": 0, "componentType": 5126, "count": 99, "type": "VEC3"}]},
     "do not fit"),
    ({"accessors": [{"bufferView": 0, "componentType": 7, "count": 3, "type": "VEC3"}]},
     "componentType"),
    ({"bufferViews": [{"buffer": 0, "byteLength": 4000}]}, "bufferViews[0]"),
    ({"buffers": [{"byteLength": 4, "uri": "../../../etc/passwd"}]}, "outside"),
    ({"meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 0}]}]},
     "indices"),
    ({"nodes": "nope"}, "nodes"),
])
def test_hostile_files_raise_gltf_error(tmp_path, over, field):
    with pytest.raises(GltfError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_gltf(_write(tmp_path, _doc(**over)))


@pytest.mark.parametrize("over", [
    {"extensionsRequired": ["KHR_draco_mesh_compression"]},
    {"accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                    "sparse": {}}]}])
def test_unsupported_features(tmp_path, over):
    with pytest.raises(UnsupportedGltfError):
        load_gltf(_write(tmp_path, _doc(**over)))


def test_truncated_glb_and_garbage(tmp_path):
    blob = (MODEL / "BoxTextured.glb").read_bytes()
    bad = tmp_path / "t.glb"
    bad.write_bytes(blob[:12] + struct.pack("<II", 10 ** 6, 0x4E4F534A) + blob[20:200])
    with pytest.raises(GltfError, match="GLB"):
        load_gltf(bad)
    junk = tmp_path / "j.gltf"
    junk.write_bytes(b"\x00\xffnot json")
    with pytest.raises(GltfError, match="JSON"):
        load_gltf(junk)


def test_png_baked_once_and_ktx2_image_loads(tmp_path):
    asset = load_gltf(MODEL / "BoxTextured.gltf")
    ktx = image_ktx2(asset.images[0], srgb=True)
    mtime = ktx.stat().st_mtime_ns
    assert image_ktx2(asset.images[0], srgb=True).stat().st_mtime_ns == mtime  # cached
    # The same model pointing at a BCn KTX2 file through an image/ktx2 URI.
    work = tmp_path / "k"
    shutil.copytree(MODEL, work)
    shutil.copy(ktx, work / "logo.ktx2")
    doc = json.loads((work / "BoxTextured.gltf").read_text())
    doc["images"] = [{"uri": "logo.ktx2", "mimeType": "image/ktx2"}]
    asset2 = load_gltf(_write(work, doc))
    assert asset2.images[0].mime_type == "image/ktx2"
    assert image_ktx2(asset2.images[0], srgb=True) == (work / "logo.ktx2").resolve()


def test_add_to_scene_draws_and_releases(device):
    from engine.render.scene import Scene
    from engine.streaming.static import StaticTextureProvider

    provider = StaticTextureProvider(device)
    scene = Scene(device)
    try:
        instances = add_to_scene(load_gltf(MODEL / "BoxTextured.glb"), scene, provider)
        assert len(instances) == 1 and instances[0].material.albedo == 0
        assert provider.stats().resident_bytes > 0
        assert instances[0].radius == pytest.approx(np.sqrt(3) / 2, rel=1e-3)
    finally:
        scene.release()
        provider.release()
