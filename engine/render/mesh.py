"""Meshes: CPU geometry (with the numbers streaming needs) and its GPU buffers.

Besides drawing, a mesh provides two numbers the texture streamer needs per instance: its
bounding sphere (how big it is on screen) and its UV density (texels per world unit, once
multiplied by the texture size), which together give the mip level a texture needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..gl.device import Device
from ..gl.types import Buffer, Program, VertexArray

VERTEX_FORMAT = "3f 3f 2f 4f"
VERTEX_ATTRIBUTES = ("in_position", "in_normal", "in_uv", "in_tangent")


@dataclass
class MeshData:
    """Indexed triangles. Tangents are (x, y, z, handedness) for normal mapping."""

    positions: np.ndarray  # (N, 3) float32
    normals: np.ndarray  # (N, 3) float32
    uvs: np.ndarray  # (N, 2) float32
    indices: np.ndarray  # (M,) uint32, M % 3 == 0
    tangents: np.ndarray | None = None  # (N, 4) float32

    def __post_init__(self) -> None:
        n = len(self.positions)
        if len(self.normals) != n or len(self.uvs) != n:
            raise ValueError("positions, normals and uvs must have one row per vertex")
        if len(self.indices) % 3 or (len(self.indices) and self.indices.max() >= n):
            raise ValueError("indices must be whole triangles referring to existing vertices")
        if self.tangents is None:
            self.tangents = compute_tangents(self)

    def bounds(self) -> tuple[np.ndarray, float]:
        """Bounding sphere (centre, radius) around the box centre: cheap and good enough for
        a screen-size estimate."""
        lo, hi = self.positions.min(axis=0), self.positions.max(axis=0)
        center = (lo + hi) * 0.5
        return center.astype(np.float32), float(np.linalg.norm(self.positions - center,
                                                               axis=1).max())

    def uv_density(self) -> float:
        """UV units per world unit: the area-weighted mean over triangles of
        sqrt(uv area / world area). Degenerate triangles carry no weight."""
        tri = self.indices.reshape(-1, 3)
        p, t = self.positions[tri], self.uvs[tri]
        world = 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)
        e1, e2 = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
        uv = 0.5 * np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
        ok = world > 1e-12
        if not ok.any() or world[ok].sum() == 0:
            return 0.0
        return float((world[ok] * np.sqrt(uv[ok] / world[ok])).sum() / world[ok].sum())

    def interleaved(self) -> np.ndarray:
        return np.hstack([self.positions, self.normals, self.uvs, self.tangents]).astype(
            np.float32)


def compute_tangents(mesh: MeshData) -> np.ndarray:
    """Per-vertex tangents from UV gradients (accumulated per triangle, Gram-Schmidt)."""
    tri = mesh.indices.reshape(-1, 3)
    p, t = mesh.positions[tri], mesh.uvs[tri]
    e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    d1, d2 = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
    det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
    r = np.where(np.abs(det) > 1e-12, 1.0 / np.where(det == 0, 1, det), 0.0)[:, None]
    sdir = (e1 * d2[:, 1:2] - e2 * d1[:, 1:2]) * r
    tdir = (e2 * d1[:, 0:1] - e1 * d2[:, 0:1]) * r
    tan = np.zeros_like(mesh.positions, dtype=np.float64)
    bit = np.zeros_like(tan)
    for k in range(3):
        np.add.at(tan, tri[:, k], sdir)
        np.add.at(bit, tri[:, k], tdir)
    n = mesh.normals.astype(np.float64)
    tan -= n * (n * tan).sum(axis=1, keepdims=True)
    length = np.linalg.norm(tan, axis=1, keepdims=True)
    tan = np.where(length > 1e-12, tan / np.maximum(length, 1e-12), [1.0, 0.0, 0.0])
    hand = np.where((np.cross(n, tan) * bit).sum(axis=1) < 0.0, -1.0, 1.0)[:, None]
    return np.hstack([tan, hand]).astype(np.float32)


def quad(width: float = 1.0, height: float = 1.0, uv_repeat: tuple[float, float] = (1, 1)
         ) -> MeshData:
    """A quad in the XY plane facing +Z, centred on the origin. UV (0, 0) is the top-left
    corner: texture files store the top row first (KTX2 "rd", glTF), and GL puts the first
    row at v = 0, so this shows images upright."""
    w, h = width / 2, height / 2
    pos = np.array([[-w, -h, 0], [w, -h, 0], [w, h, 0], [-w, h, 0]], np.float32)
    nrm = np.tile(np.array([0, 0, 1], np.float32), (4, 1))
    u, v = uv_repeat
    uvs = np.array([[0, v], [u, v], [u, 0], [0, 0]], np.float32)
    return MeshData(pos, nrm, uvs, np.array([0, 1, 2, 0, 2, 3], np.uint32))


def box(size: tuple[float, float, float] = (1, 1, 1)) -> MeshData:
    """An axis-aligned box with one UV square per face."""
    sx, sy, sz = (s / 2 for s in size)
    faces = [  # normal, u axis, v axis
        ((1, 0, 0), (0, 0, -1), (0, 1, 0)), ((-1, 0, 0), (0, 0, 1), (0, 1, 0)),
        ((0, 1, 0), (1, 0, 0), (0, 0, -1)), ((0, -1, 0), (1, 0, 0), (0, 0, 1)),
        ((0, 0, 1), (1, 0, 0), (0, 1, 0)), ((0, 0, -1), (-1, 0, 0), (0, 1, 0))]
    half = np.array([sx, sy, sz], np.float32)
    pos, nrm, uvs, idx = [], [], [], []
    for n, u, v in faces:
        n, u, v = (np.array(a, np.float32) for a in (n, u, v))
        base = len(pos)
        for cu, cv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            pos.append((n + u * cu + v * cv) * half)
            nrm.append(n)
            uvs.append(((cu + 1) / 2, (1 - cv) / 2))  # top row at v = 0, as in quad()
        idx += [base, base + 1, base + 2, base, base + 2, base + 3]
    return MeshData(np.array(pos, np.float32), np.array(nrm, np.float32),
                    np.array(uvs, np.float32), np.array(idx, np.uint32))


@dataclass(eq=False)
class Mesh:
    """GPU copy of a MeshData: one interleaved vertex buffer, one index buffer, and a vertex
    array per program (made on first draw with that program).

    The buffers are made on first use: the batched renderer draws every mesh from one shared
    buffer (engine/render/batch.py GeometryArena) and never touches these, so a scene drawn
    only that way holds its geometry once, not twice (under a tight budget the render
    targets get those bytes)."""

    device: Device
    data: MeshData
    label: str = "mesh"
    _vbo: Buffer | None = field(init=False, default=None)
    _ibo: Buffer | None = field(init=False, default=None)
    _vaos: dict[int, VertexArray] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.center, self.radius = self.data.bounds()
        self.uv_density = self.data.uv_density()

    def _make_buffers(self) -> None:
        vbo = self.device.buffer(self.data.interleaved().tobytes(), label=f"{self.label}.vbo")
        try:
            self._ibo = self.device.buffer(self.data.indices.astype(np.uint32).tobytes(),
                                           label=f"{self.label}.ibo")
        except BaseException:
            self.device.release(vbo)
            raise
        self._vbo = vbo

    def prepare(self) -> None:
        """Make the buffers now (a path that draws this mesh itself, before the governor's
        split: they are then fixed memory of frame 0, not a surprise in it)."""
        if self._vbo is None:
            self._make_buffers()

    @property
    def vbo(self) -> Buffer:
        if self._vbo is None:
            self._make_buffers()
        return self._vbo

    @property
    def ibo(self) -> Buffer:
        if self._ibo is None:
            self._make_buffers()
        return self._ibo

    def vertex_array(self, program: Program) -> VertexArray:
        vao = self._vaos.get(program.glo)
        if vao is None:
            vao = self.device.vertex_array(
                program, [(self.vbo, VERTEX_FORMAT, *VERTEX_ATTRIBUTES)], self.ibo,
                index_element_size=4, skip_errors=True, label=f"{self.label}.vao")
            self._vaos[program.glo] = vao
        return vao

    def release(self) -> None:
        for vao in self._vaos.values():
            self.device.release(vao)
        self._vaos.clear()
        if self._ibo is not None:
            self.device.release(self._ibo)
        if self._vbo is not None:
            self.device.release(self._vbo)
        self._vbo = self._ibo = None
