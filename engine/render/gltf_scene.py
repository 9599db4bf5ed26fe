"""A loaded glTF asset into a scene: GPU meshes owned by the scene, materials whose textures
the provider streams, one scene instance per (node, primitive)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from pyglm import glm

from ..streaming.contract import TextureProvider
from .gltf import GltfAsset
from .gltf_images import image_ktx2
from .material import Material
from .mesh import Mesh
from .scene import Instance, Scene


def add_to_scene(asset: GltfAsset, scene: Scene, provider: TextureProvider, *,
                 transform: glm.mat4 | None = None, cache_dir: Path | None = None
                 ) -> list[Instance]:
    """Make GPU meshes (owned by the scene), materials with provider texture ids, and one
    scene instance per (node, primitive). `transform` places the whole asset."""
    from ..gl.basis_targets import configure

    configure(scene.device)  # Basis images transcode to what this driver samples
    base = np.array(transform.to_list(), np.float32).T if transform is not None else np.eye(4)
    tex_ids: dict[tuple[int, bool, bool], int] = {}

    def texture(index: int | None, srgb: bool, normal: bool = False) -> int:
        if index is None:
            return -1
        key = (index, srgb, normal)
        if key not in tex_ids:
            path = image_ktx2(asset.images[index], srgb=srgb, normal_map=normal,
                              cache_dir=cache_dir)
            tex_ids[key] = provider.register(f"{asset.path.name}#{path.name}", path)
        return tex_ids[key]

    materials = [Material(
        name=m.name, albedo=texture(m.base_color_image, True),
        normal=texture(m.normal_image, False, True),
        roughness_metal=texture(m.metallic_roughness_image, False),
        albedo_factor=m.base_color_factor, roughness=m.roughness_factor,
        metalness=m.metallic_factor, emissive=m.emissive_factor, normal_scale=m.normal_scale,
        uv_transform=(m.uv_transform[:3], m.uv_transform[3:]))
        for m in asset.materials]
    default = Material(name="gltf-default", roughness=1.0, metalness=1.0)
    scene.materials.extend(materials)
    meshes: list[list[tuple[Mesh, Material]]] = []
    for mi, m in enumerate(asset.meshes):
        meshes.append([(scene.add_mesh(Mesh(scene.device, p.data, label=f"{m.name}.{pi}")),
                        materials[p.material] if p.material is not None else default)
                       for pi, p in enumerate(m.primitives)])
    out = []
    for inst in asset.instances:
        world = base @ inst.world
        model = glm.mat4(*world.T.ravel().tolist())  # glm takes columns
        out.extend(scene.add(mesh, mat, model) for mesh, mat in meshes[inst.mesh])
    return out
