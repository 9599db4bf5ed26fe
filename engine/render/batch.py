"""The batched (GPU-driven) scene pass: one buffer write and a few draw calls per frame.

Per frame, with numpy only:
  1. cull: every object's world bounding sphere against the six frustum planes;
  2. pack: each visible object's row (transform, normal matrix, material parameters, texture
     references, per-texture min LOD, mip-debug numbers) into a (n, 64) float32 array, in
     draw order, followed by one indirect draw command per object (baseInstance = its row);
  3. write rows + commands into the frame ring with ONE copy, bind the slice as the shader
     storage block and as the draw-indirect buffer;
  4. draw: with bindless textures (each row holds its texture handles) ONE
     glMultiDrawElementsIndirect for the whole scene; without (llvmpipe) objects are sorted by
     texture set and each set is bound once and drawn with one multi-draw; never a
     per-object uniform write.

Every mesh of the scene lives in one shared vertex and index buffer (`GeometryArena`), since
a multi-draw takes one vertex array; a command's firstIndex/baseVertex pick its mesh.

The fade-in clamp is in the shader (`min_lod` per slot, in the texture's storage levels):
a bindless handle freezes the sampler state, so GL_TEXTURE_MIN_LOD cannot move any more.
On the bound path the sampler's own clamp still applies and agrees with the shader's.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..gl import shaders
from ..gl.bindless import BindlessTextures, bindless_supported
from ..gl.buffers import FrameRing
from ..gl.indirect import DRAW_COMMAND, batched_frame_supported, bind_storage, multi_draw
from .mesh import VERTEX_ATTRIBUTES, VERTEX_FORMAT, Mesh
from .objects import FLAG_ALBEDO, FLAG_NORMAL, FLAG_RM, ObjectArrays

log = logging.getLogger(__name__)

ROW_FLOATS = 64
ROW_BYTES = ROW_FLOATS * 4
NO_CLAMP = -1000.0  # GL_TEXTURE_MIN_LOD's default: no clamp
TextureMode = Literal["bindless", "bound"]
_SLOT_FLAGS = (FLAG_ALBEDO, FLAG_NORMAL, FLAG_RM)


# ---------------------------------------------------------------------- pure policy
def frustum_planes(view_proj: np.ndarray) -> np.ndarray:
    """The six planes (a, b, c, d), normals pointing inside and normalised, of a row-major
    view-projection matrix (Gribb & Hartmann)."""
    m = np.asarray(view_proj, np.float64)
    planes = np.stack([m[3] + m[0], m[3] - m[0], m[3] + m[1], m[3] - m[1],
                       m[3] + m[2], m[3] - m[2]])
    return planes / np.linalg.norm(planes[:, :3], axis=1, keepdims=True)


def cull_spheres(planes: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Visible mask: a sphere is out when it lies wholly behind any plane."""
    if len(centers) == 0:
        return np.zeros(0, bool)
    dist = np.asarray(centers, np.float32) @ planes[:, :3].T.astype(np.float32) \
        + planes[:, 3].astype(np.float32)
    return (dist >= -np.asarray(radii, np.float32)[:, None]).all(axis=1)


def texture_set_order(texture_ids: np.ndarray, texture_count: int) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """Order objects by texture set (the bound path binds once per set): returns the
    permutation and the start of each run of equal sets in permuted order (plus the end)."""
    n = len(texture_ids)
    if n == 0:
        return np.zeros(0, np.intp), np.zeros(1, np.intp)
    base = np.int64(texture_count + 1)
    t = texture_ids.astype(np.int64) + 1
    key = (t[:, 0] * base + t[:, 1]) * base + t[:, 2]
    order = np.argsort(key, kind="stable")
    ks = key[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    return order, np.r_[starts, n]


def pack_rows(objects: ObjectArrays, visible: np.ndarray, textures: TextureState,
              handles: np.ndarray | None) -> np.ndarray:
    """The GPU rows (n, 64) float32 of the objects `visible` (indices, in draw order).
    Layout = struct ObjectData in shaders/objects.glsl."""
    n = len(visible)
    rows = np.zeros((n, ROW_FLOATS), np.float32)
    if n == 0:
        return rows
    u = rows.view(np.uint32)
    rows[:, 0:16] = objects.model[visible]
    rows[:, 16:28] = objects.normal[visible]
    mat = objects.material_rows[objects.material_index[visible]]
    rows[:, 28:35] = mat[:, 0:7]
    u[:, 35] = mat[:, 7].view(np.uint32)
    rows[:, 36:39] = mat[:, 8:11]
    rows[:, 56:64] = mat[:, 12:20]
    tids = objects.texture_ids[visible]
    has = tids >= 0
    safe = np.where(has, tids, 0)
    if textures.count:
        lods = np.where(has, textures.min_lod_storage[safe], NO_CLAMP)
        alb = has[:, 0]
        rows[:, 39] = np.where(alb, textures.min_lod_chain[safe[:, 0]], 0.0)
        rows[:, 44] = np.where(alb, textures.chain_width[safe[:, 0]], 1.0)
        rows[:, 45] = np.where(alb, textures.chain_height[safe[:, 0]], 1.0)
    else:
        lods = np.full(tids.shape, NO_CLAMP, np.float32)
    rows[:, 40:43] = lods
    if handles is not None:
        h = np.where(has, handles[safe], 0).astype(np.uint64) if len(handles) else \
            np.zeros(tids.shape, np.uint64)
        u[:, 48:54] = h.view(np.uint32).reshape(n, 6)
        # a texture without a handle (none made, or released) is not sampled at all
        missing = has & (h == 0)
        if missing.any():
            clear = (missing * np.array(_SLOT_FLAGS, np.uint32)).sum(axis=1).astype(np.uint32)
            u[:, 35] &= ~clear
    return rows


def build_frame(rows: np.ndarray, index_count: np.ndarray, first_index: np.ndarray,
                base_vertex: np.ndarray, mesh_of_row: np.ndarray) -> tuple[np.ndarray, int]:
    """Rows then one draw command per row, as one byte array (the one write of the frame);
    returns it and the byte offset of the commands."""
    n = len(rows)
    cmds = np.empty(n, DRAW_COMMAND)
    cmds["count"] = index_count[mesh_of_row]
    cmds["instance_count"] = 1
    cmds["first_index"] = first_index[mesh_of_row]
    cmds["base_vertex"] = base_vertex[mesh_of_row]
    cmds["base_instance"] = np.arange(n, dtype=np.uint32)
    head = n * ROW_BYTES
    out = np.empty(head + cmds.nbytes, np.uint8)
    out[:head] = rows.reshape(-1).view(np.uint8)
    out[head:] = cmds.view(np.uint8)
    return out, head


# ---------------------------------------------------------------------- textures
@dataclass
class TextureState:
    """Per registered texture id: its GL texture (or None), the min LOD the provider clamps
    to in chain levels and in the texture's storage levels, and its chain size."""

    textures: list
    min_lod_chain: np.ndarray
    min_lod_storage: np.ndarray
    chain_width: np.ndarray
    chain_height: np.ndarray

    @property
    def count(self) -> int:
        return len(self.min_lod_chain)


class TextureTracker:
    """Reads the provider's textures and min LODs into arrays each frame, as cheaply as the
    provider allows: a `texture_table()` method (textures list, chain min LOD array) when it
    has one; for the streamer its item list, re-read only when its residency changed, and its
    fade LOD array; else one `residency()` call per texture (no GL textures: bound path)."""

    def __init__(self, provider: Any, views: bool = False, shader_clamp: bool = True) -> None:
        self.provider = provider
        # Bound textures keep the sampler's own GL_TEXTURE_MIN_LOD (the streamer sets it), so
        # the shader need not clamp again: the bound path then samples exactly as the
        # per-object path. Handles freeze the sampler, so the bindless path clamps here.
        self.shader_clamp = shader_clamp
        # Which level the shader's LOD counts from: a bindless handle is of a view whose
        # level 0 is the texture's storage level 0; a bound texture samples from its
        # GL_TEXTURE_BASE_LEVEL, which a sparse streamer sets to the finest resident level.
        self.views = views
        self._key: tuple | None = None
        self._textures: list = []
        self._base = np.zeros(0, np.float32)
        self._sample = np.zeros(0, np.float32)
        self._chain_w = np.zeros(0, np.float32)
        self._chain_h = np.zeros(0, np.float32)
        self.changed: np.ndarray = np.zeros(0, np.intp)  # ids whose GL texture changed

    def _set_textures(self, textures: list, bases: list | None = None) -> None:
        old = self._textures
        n = len(textures)
        self.changed = np.array([i for i in range(n)
                                 if i >= len(old) or old[i] is not textures[i]], np.intp)
        self._textures = textures
        tex_base = np.array([t.base_level if t is not None else 0 for t in textures],
                            np.float32)
        # finest resident chain level, and the chain level the shader's LOD counts from
        self._base = np.array(bases, np.float32) if bases is not None else tex_base
        self._sample = tex_base if self.views else self._base
        self._chain_w = np.array([t.chain_width if t is not None else 1 for t in textures],
                                 np.float32)
        self._chain_h = np.array([t.chain_height if t is not None else 1 for t in textures],
                                 np.float32)

    def state(self) -> TextureState:
        p = self.provider
        self.changed = np.zeros(0, np.intp)
        table = getattr(p, "texture_table", None)
        if callable(table):
            textures, chain = table()
            if self._key != ("table", id(textures), len(textures)) or \
                    any(a is not b for a, b in zip(textures, self._textures)):
                self._set_textures(list(textures))
                self._key = ("table", id(textures), len(textures))
            chain = np.asarray(chain, np.float32)
        elif hasattr(p, "items") and hasattr(p, "residency_changes"):
            items = p.items
            key = ("streamer", len(items), p.residency_changes)
            if key != self._key:
                self._set_textures([it.tex for it in items], [it.base for it in items])
                self._key = key
            lods = getattr(p, "_lods", None)
            chain = self._base.copy() if lods is None or len(lods) != len(items) else \
                np.maximum(np.asarray(lods, np.float32), self._base)
        elif hasattr(p, "_items"):  # the static provider: everything resident, no clamp
            items = p._items
            if self._key != ("static", len(items)):
                self._set_textures([it.tex for it in items])
                self._key = ("static", len(items))
            chain = self._base.copy()
        else:
            n = int(getattr(p.stats(), "textures", 0))
            res = [p.residency(i) for i in range(n)]
            self._textures = [None] * n
            self._base = self._sample = np.zeros(n, np.float32)
            self._chain_w = np.array([r.chain_width for r in res], np.float32)
            self._chain_h = np.array([r.chain_height for r in res], np.float32)
            chain = np.array([r.base_level for r in res], np.float32)
        storage = chain - self._sample
        storage = np.where((storage > 1e-4) & self.shader_clamp, storage,
                           NO_CLAMP).astype(np.float32)
        return TextureState(self._textures, chain, storage, self._chain_w, self._chain_h)


# ---------------------------------------------------------------------- geometry
class GeometryArena:
    """Every mesh of a scene in one vertex and one index buffer (what a multi-draw needs)."""

    def __init__(self, device: Any, meshes: list[Mesh], label: str = "arena") -> None:
        self.device = device
        self.key = tuple(id(m) for m in meshes)
        verts, idx = [], []
        n_idx, first, base = [], [], []
        v0 = i0 = 0
        for m in meshes:
            inter = m.data.interleaved()
            ind = m.data.indices.astype(np.uint32)
            verts.append(inter)
            idx.append(ind)
            n_idx.append(len(ind))
            first.append(i0)
            base.append(v0)
            v0 += len(inter)
            i0 += len(ind)
        self.index_count = np.array(n_idx, np.uint32)
        self.first_index = np.array(first, np.uint32)
        self.base_vertex = np.array(base, np.int32)
        vdata = np.concatenate(verts) if verts else np.zeros((1, 12), np.float32)
        idata = np.concatenate(idx) if idx else np.zeros(3, np.uint32)
        self.vbo = device.buffer(vdata.astype(np.float32).tobytes(), label=f"{label}.vbo")
        try:
            self.ibo = device.buffer(idata.tobytes(), label=f"{label}.ibo")
        except BaseException:
            device.release(self.vbo)
            raise
        self._vaos: dict[int, Any] = {}

    def vertex_array(self, program: Any) -> Any:
        vao = self._vaos.get(id(program))
        if vao is None:
            vao = self.device.vertex_array(
                program, [(self.vbo, VERTEX_FORMAT, *VERTEX_ATTRIBUTES)], self.ibo,
                index_element_size=4, skip_errors=True, label="arena.vao")
            self._vaos[id(program)] = vao
        return vao

    def release(self) -> None:
        for vao in self._vaos.values():
            self.device.release(vao)
        self._vaos.clear()
        self.device.release(self.ibo)
        self.device.release(self.vbo)


def batched_source(name: str, bindless: bool, clamp_ext: bool = False) -> str:
    """A batched shader's source, with BINDLESS (textures from handles) and LOD_CLAMP_EXT
    (textureClampARB) defined right after #version when asked."""
    src = shaders.load(name)
    defines = ("#define BINDLESS 1\n" if bindless else "") + \
        ("#define LOD_CLAMP_EXT 1\n" if clamp_ext else "")
    if not defines:
        return src
    first, _, rest = src.partition("\n")
    return f"{first}\n{defines}{rest}"


@dataclass
class BatchStats:
    objects: int = 0
    visible: int = 0
    draw_calls: int = 0
    texture_binds: int = 0
    bytes_written: int = 0
    handles: int = 0


class BatchedPass:
    """Draws a scene's objects with a program of the batched family (objects.glsl), through
    the frame ring and indirect multi-draws. `mode` "bindless" or "bound"."""

    def __init__(self, device: Any, provider: Any, *, mode: TextureMode,
                 shader_clamp: bool | None = None, label: str = "batched") -> None:
        if not batched_frame_supported(device):
            raise RuntimeError("the batched frame needs GL 4.3-class indirect draws, SSBOs "
                               "and ARB_shader_draw_parameters")
        if mode == "bindless" and not bindless_supported(device):
            raise RuntimeError("bindless mode needs ARB_bindless_texture")
        self.device = device
        self.provider = provider
        self.mode: TextureMode = mode
        self.label = label
        self.ring = FrameRing(device, 64 << 10, label=f"{label}.ring")
        self.bindless = BindlessTextures(device) if mode == "bindless" else None
        self.textures = TextureTracker(
            provider, views=mode == "bindless",
            shader_clamp=mode == "bindless" if shader_clamp is None else shader_clamp)
        self._handles = np.zeros(0, np.uint64)
        self._arena: GeometryArena | None = None
        self.stats = BatchStats()

    # ------------------------------------------------------------------ per frame
    def _arena_for(self, objects: ObjectArrays) -> GeometryArena:
        key = tuple(id(m) for m in objects.meshes)
        if self._arena is None or self._arena.key != key:
            if self._arena is not None:
                self._arena.release()
            self._arena = GeometryArena(self.device, list(objects.meshes),
                                        label=f"{self.label}.arena")
        return self._arena

    def _handle_array(self, state: TextureState) -> np.ndarray:
        assert self.bindless is not None
        n = state.count
        if len(self._handles) != n:
            old = self._handles
            self._handles = np.zeros(n, np.uint64)
            self._handles[:min(len(old), n)] = old[:n]
            todo = np.arange(n)
        else:
            todo = self.textures.changed
            if self.bindless is not None and len(todo) == 0 and self._handles.size and \
                    not self._handles.all():
                todo = np.flatnonzero(self._handles == 0)
        for t in todo:
            tex = state.textures[t]
            self._handles[t] = self.bindless.handle(tex) if tex is not None and \
                not getattr(tex, "released", False) else 0
        return self._handles

    def draw(self, objects: ObjectArrays, program: Any, view_proj: np.ndarray,
             cull: bool = True) -> BatchStats:
        """Cull, pack, write and draw every object with `program` into the bound
        framebuffer (the caller set the program's per-frame uniforms and the state)."""
        st = BatchStats(objects=objects.count)
        arena = self._arena_for(objects)
        if cull:
            visible = np.flatnonzero(cull_spheres(frustum_planes(view_proj), objects.center,
                                                  objects.radius))
        else:
            visible = np.arange(objects.count)
        tstate = self.textures.state()
        groups: list[tuple[int, int]] = []
        if self.mode == "bindless":
            handles = self._handle_array(tstate)
            order = visible[np.argsort(objects.mesh_index[visible], kind="stable")]
            groups = [(0, len(order))] if len(order) else []
        else:
            handles = None
            perm, bounds = texture_set_order(objects.texture_ids[visible], tstate.count)
            order = visible[perm]
            groups = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        rows = pack_rows(objects, order, tstate, handles)
        data, cmd_at = build_frame(rows, arena.index_count, arena.first_index,
                                   arena.base_vertex, objects.mesh_index[order])
        st.visible = len(order)
        if not len(order):
            self.stats = st
            return st
        offset = self.ring.write(data)
        st.bytes_written = data.nbytes
        bind_storage(self.device, 0, self.ring.glo, offset, max(cmd_at, ROW_BYTES))
        vao = arena.vertex_array(program)
        tids = objects.texture_ids[order]
        for a, b in groups:
            if self.mode == "bound":
                for unit, tid in enumerate(tids[a]):
                    if tid >= 0:
                        self.provider.bind(int(tid), unit)
                        st.texture_binds += 1
            # base_instance is the row index, so a group's commands read rows a..b-1
            multi_draw(self.device, program.glo, vao.glo, self.ring.glo,
                       offset + cmd_at + a * DRAW_COMMAND.itemsize, b - a)
            st.draw_calls += 1
        self.ring.end_frame()
        st.handles = len(self.bindless) if self.bindless is not None else 0
        self.stats = st
        return st

    def release(self) -> None:
        if self._arena is not None:
            self._arena.release()
            self._arena = None
        if self.bindless is not None:
            self.bindless.release()
            self.bindless = None
        self.ring.release()
