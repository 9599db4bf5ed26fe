"""Per-object data as numpy arrays, owned by the scene and kept current incrementally.

Why arrays: the renderer's per-object Python (uniform writes, matrix inverses, bounds) was
most of a frame's CPU time (issue 11: ~12 of 13.5 ms at 200 objects on the H200). Here every
per-object number the renderer and the texture provider need sits in one row of a few arrays;
a frame gathers and packs them with numpy and writes them to the GPU at once.

Keeping them current: an `Instance` tells its table when its model, mesh or material is
assigned, and only that row is recomputed; a material tells the tables that hold it when a
field is assigned, and their (few) material rows are rebuilt; instances added or removed rebuild the table.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..streaming.contract import TEXTURE_SLOTS
from .material import Material

if TYPE_CHECKING:
    from .instance import Instance
    from .mesh import Mesh

#: material row columns: albedo factor (4), roughness, metalness, normal scale, flag bits,
#: emissive (3), 0, UV transform rows (a, b, c, 0), (d, e, f, 0): u' = a u + b v + c.
MATERIAL_COLUMNS = 20
FLAG_ALBEDO, FLAG_NORMAL, FLAG_RM = 1, 2, 4


def _uv_rows(m: Material) -> tuple[float, ...]:
    """The material's UV transform as two rows of a 2x3 affine matrix (identity without one).

    Accepts a `uv_transform` attribute holding a 3x3 (row-major) or 2x3 matrix, or
    offset/scale/rotation in glTF's KHR_texture_transform order (translate * rotate * scale)."""
    t = getattr(m, "uv_transform", None)
    if t is None:
        return (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    if hasattr(t, "matrix"):
        t = t.matrix() if callable(t.matrix) else t.matrix
    a = np.asarray(t, np.float64)
    if a.shape in ((3, 3), (2, 3)):
        return (a[0, 0], a[0, 1], a[0, 2], 0.0, a[1, 0], a[1, 1], a[1, 2], 0.0)
    off = np.asarray(getattr(t, "offset", (0.0, 0.0)), np.float64)
    sc = np.asarray(getattr(t, "scale", (1.0, 1.0)), np.float64)
    rot = float(getattr(t, "rotation", 0.0))
    c, s = np.cos(rot), np.sin(rot)
    return (c * sc[0], s * sc[1], off[0], 0.0, -s * sc[0], c * sc[1], off[1], 0.0)


def material_row(m: Material) -> np.ndarray:
    """One material's parameters in the GPU layout (flags as uint32 bits in a float32)."""
    row = np.zeros(MATERIAL_COLUMNS, np.float32)
    row[0:4] = m.albedo_factor
    row[4:7] = (m.roughness, m.metalness, m.normal_scale)
    flags = (FLAG_ALBEDO if m.albedo >= 0 else 0) | (FLAG_NORMAL if m.normal >= 0 else 0) \
        | (FLAG_RM if m.roughness_metal >= 0 else 0)
    row[7:8].view(np.uint32)[0] = flags
    row[8:11] = m.emissive
    row[12:20] = _uv_rows(m)
    return row


def transform_rows(models: np.ndarray, mesh_center: np.ndarray, mesh_radius: np.ndarray,
                   mesh_density: np.ndarray) -> dict[str, np.ndarray]:
    """Vectorised per-object numbers from (k, 4, 4) row-major model matrices: GL-ready
    column-major model (k, 16), normal matrix columns padded to vec4 (k, 12), world bounding
    sphere and UV density (the mesh's, shrunk by the largest axis scale)."""
    m = np.asarray(models, np.float64)
    k = m.shape[0]
    lin = m[:, :3, :3]
    scale = np.linalg.norm(lin, axis=1).max(axis=1) if k else np.zeros(0)
    det = np.linalg.det(lin) if k else np.zeros(0)
    safe = np.where(np.abs(det)[:, None, None] > 1e-20, lin, np.eye(3)) if k else lin
    normal = np.linalg.inv(safe).transpose(0, 2, 1) if k else np.zeros((0, 3, 3))
    ncols = np.zeros((k, 3, 4), np.float32)
    ncols[:, :, :3] = normal.transpose(0, 2, 1)  # column j of the normal matrix in row j
    center = np.einsum("kij,kj->ki", m[:, :3, :3], mesh_center) + m[:, :3, 3]
    return {"model": m.transpose(0, 2, 1).reshape(k, 16).astype(np.float32),
            "normal": ncols.reshape(k, 12),
            "center": center.astype(np.float32),
            "radius": (np.asarray(mesh_radius) * scale).astype(np.float32),
            "uv_density": (np.asarray(mesh_density) / np.maximum(scale, 1e-9)).astype(
                np.float32)}


class ObjectArrays:
    """Row i = scene.instances[i]. Attributes are numpy arrays (read them, do not write)."""

    def __init__(self) -> None:
        self.count = 0
        self.version = 0  # bumped on every change: consumers cache derived data on it
        self.meshes: list[Mesh] = []
        self.materials: list[Material] = []
        self.model = np.zeros((0, 16), np.float32)
        self.normal = np.zeros((0, 12), np.float32)
        self.center = np.zeros((0, 3), np.float32)
        self.radius = np.zeros(0, np.float32)
        self.uv_density = np.zeros(0, np.float32)
        self.mesh_index = np.zeros(0, np.int32)
        self.material_index = np.zeros(0, np.int32)
        self.texture_ids = np.zeros((0, len(TEXTURE_SLOTS)), np.int32)
        self.material_rows = np.zeros((0, MATERIAL_COLUMNS), np.float32)
        self.material_textures = np.zeros((0, len(TEXTURE_SLOTS)), np.int32)
        self.material_uv_scale = np.zeros(0, np.float32)
        self._density: tuple[int, np.ndarray] = (-1, self.uv_density)
        self._dirty: set[int] = set()
        self._stale = True
        self._last: Instance | None = None
        self._materials_stale = True

    # ------------------------------------------------------------------ change tracking
    def material_changed(self) -> None:
        """A material of this table had a field assigned (engine.render.material.Material)."""
        self._materials_stale = True

    def _changed(self, inst: Instance) -> None:
        row = inst.__dict__.get("_row")
        if row is None:
            self._stale = True
        else:
            self._dirty.add(row)

    def sync(self, instances: list[Instance]) -> None:
        n = len(instances)
        if self._stale or n != self.count or (n and instances[-1] is not self._last):
            self._rebuild(instances)
        elif self._dirty:
            self._update_rows(instances, sorted(self._dirty))
        if self._materials_stale:
            self._rebuild_materials()
        self._dirty.clear()

    # ------------------------------------------------------------------ rebuilding
    def _mesh_id(self, mesh: Mesh, index: dict[int, int]) -> int:
        i = index.get(id(mesh))
        if i is None:
            i = index[id(mesh)] = len(self.meshes)
            self.meshes.append(mesh)
        return i

    def _rebuild(self, instances: list[Instance]) -> None:
        n = len(instances)
        self.meshes, self.materials = [], []
        mesh_ix: dict[int, int] = {}
        mat_ix: dict[int, int] = {}
        mesh_index = np.empty(n, np.int32)
        material_index = np.empty(n, np.int32)
        for i, inst in enumerate(instances):
            inst.__dict__["_row"] = i
            inst.__dict__["_owner"] = self
            mesh_index[i] = self._mesh_id(inst.mesh, mesh_ix)
            j = mat_ix.get(id(inst.material))
            if j is None:
                j = mat_ix[id(inst.material)] = len(self.materials)
                self.materials.append(inst.material)
                inst.material.watch(self)
            material_index[i] = j
        self.mesh_index, self.material_index = mesh_index, material_index
        self.count = n
        self._last = instances[-1] if n else None
        cols = self._transforms(instances, range(n))
        for name, arr in cols.items():
            setattr(self, name, arr)
        self._stale = False
        self._rebuild_materials()

    def _transforms(self, instances: list[Instance], rows) -> dict[str, np.ndarray]:
        rows = list(rows)
        models = np.array([instances[i].model.to_list() for i in rows],
                          np.float64).reshape(len(rows), 4, 4).transpose(0, 2, 1)
        mi = self.mesh_index[rows]
        centers = np.array([m.center for m in self.meshes], np.float64).reshape(-1, 3)
        radii = np.array([m.radius for m in self.meshes], np.float64)
        density = np.array([m.uv_density for m in self.meshes], np.float64)
        return transform_rows(models, centers[mi] if len(rows) else np.zeros((0, 3)),
                              radii[mi] if len(rows) else np.zeros(0),
                              density[mi] if len(rows) else np.zeros(0))

    def _update_rows(self, instances: list[Instance], rows: list[int]) -> None:
        mesh_ix = {id(m): i for i, m in enumerate(self.meshes)}
        mat_ix = {id(m): i for i, m in enumerate(self.materials)}
        for r in rows:
            inst = instances[r]
            self.mesh_index[r] = self._mesh_id(inst.mesh, mesh_ix)
            j = mat_ix.get(id(inst.material))
            if j is None:
                j = mat_ix[id(inst.material)] = len(self.materials)
                self.materials.append(inst.material)
                inst.material.watch(self)
                self._materials_stale = True  # a new material row is needed
            self.material_index[r] = j
        cols = self._transforms(instances, rows)
        for name, arr in cols.items():
            getattr(self, name)[rows] = arr
        if not self._materials_stale:
            self.texture_ids[rows] = self.material_textures[self.material_index[rows]]
        self.version += 1

    def _rebuild_materials(self) -> None:
        mats = self.materials
        self.material_rows = (np.stack([material_row(m) for m in mats]) if mats
                              else np.zeros((0, MATERIAL_COLUMNS), np.float32))
        self.material_textures = (np.array([m.texture_ids() for m in mats], np.int32)
                                  .reshape(len(mats), len(TEXTURE_SLOTS)))
        self.texture_ids = (self.material_textures[self.material_index] if self.count
                            else np.zeros((0, len(TEXTURE_SLOTS)), np.int32))
        uv = self.material_rows[:, 12:20].astype(np.float64)
        self.material_uv_scale = np.maximum(np.hypot(uv[:, 0], uv[:, 4]),
                                            np.hypot(uv[:, 1], uv[:, 5])).astype(np.float32)
        self._materials_stale = False
        self.version += 1

    def texel_density(self) -> np.ndarray:
        """UV units per world unit of each object as its textures are sampled: the mesh's
        density through the model's scale (`uv_density`) times its material's UV transform
        scale, so a quad showing part of a texture (an atlas cell, a glTF texture transform)
        asks for the detail it shows, not the whole texture's."""
        if self._density[0] != self.version:  # computed once per change, not per frame
            density = self.uv_density * self.material_uv_scale[self.material_index] \
                if self.count else self.uv_density
            self._density = (self.version, density)
        return self._density[1]
