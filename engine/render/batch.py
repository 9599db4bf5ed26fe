"""The batched (GPU-driven) scene pass: one buffer write and a few draw calls per frame.

Per frame, with numpy only:
  1. cull: every object's world bounding sphere against the six frustum planes;
  2. pack: each visible object's row (transform, normal matrix, material parameters, texture
     ids) in draw order, one row per texture id (min LOD clamp, bindless handle, mip-debug
     numbers), and one indirect draw command per object (baseInstance = its row); each part
     is rebuilt only when its inputs changed;
  3. write the three parts into the frame ring with ONE copy, bind the slice as the two
     shader storage blocks and as the draw-indirect buffer;
  4. draw: with bindless textures (the texture rows hold the handles) ONE
     glMultiDrawElementsIndirect for the whole scene; without (llvmpipe) objects are sorted by
     texture set and each set is bound once and drawn with one multi-draw (a set used by one
     object: one direct draw with its base instance); never a per-object uniform write.

Every mesh of the scene lives in one shared vertex and index buffer (`GeometryArena`), since
a multi-draw takes one vertex array; a command's firstIndex/baseVertex pick its mesh.

The fade-in clamp of a bindless texture is in the shader (the texture row's min LOD, in the
sampled levels): a handle freezes the sampler state, so GL_TEXTURE_MIN_LOD cannot move any
more. On the bound path the sampler's own clamp (set by the streamer) applies and the shader
does not clamp again, so that path samples exactly as the per-object path does.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

import numpy as np

from ..gl import shaders
from ..gl.bindless import BindlessTextures, bindless_supported
from ..gl.buffers import FrameRing
from ..gl.indirect import (
    DRAW_COMMAND,
    DrawSession,
    batched_frame_supported,
    bind_storage,
)
from ..streaming.contract import ResidentTexturesSource, VirtualTextureHost
from ..streaming.culling import cull_spheres, frustum_planes
from .mesh import VERTEX_ATTRIBUTES, VERTEX_FORMAT, Mesh
from .objects import ObjectArrays

log = logging.getLogger(__name__)

ROW_FLOATS = 52  # struct ObjectData (shaders/objects.glsl), 208 bytes
ROW_BYTES = ROW_FLOATS * 4
TEXTURE_FLOATS = 8  # struct TextureData, 32 bytes
NO_CLAMP = -1000.0  # GL_TEXTURE_MIN_LOD's default: no clamp
TextureMode = Literal["bindless", "bound", "none"]


# ---------------------------------------------------------------------- pure policy
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


def static_rows(objects: ObjectArrays) -> np.ndarray:
    """The (N, 52) float32 rows of every object (struct ObjectData): transform, normal
    matrix, material parameters and flag bits, texture ids, UV transform. They change only
    when an instance or a material does (the pass caches them on `objects.version`)."""
    n = objects.count
    rows = np.zeros((n, ROW_FLOATS), np.float32)
    if n == 0:
        return rows
    rows[:, 0:16] = objects.model
    rows[:, 16:28] = objects.normal
    mat = objects.material_rows[objects.material_index]
    rows[:, 28:39] = mat[:, 0:11]  # albedo factor, params, flag bits (as float32), emissive
    ids = rows.view(np.int32)
    ids[:, 40:43] = objects.texture_ids
    ids[:, 43] = -1
    rows[:, 44:52] = mat[:, 12:20]
    return rows


def pack_rows(objects: ObjectArrays, visible: np.ndarray) -> np.ndarray:
    """The rows of the objects `visible` (indices, in draw order)."""
    return static_rows(objects)[visible]


def texture_rows(textures: TextureState, handles: np.ndarray | None) -> np.ndarray:
    """(T + 1, 8) float32 rows of struct TextureData, one per texture id plus a spare (GL
    wants a non-empty block): min LOD clamp in sampled levels, resident chain level, chain
    size, bindless handle (as two uint32), virtual-texture id + 1 (uint32; 0: not virtual,
    the shader samples the page cache through vt_sample otherwise)."""
    t = textures.count
    out = np.zeros((t + 1, TEXTURE_FLOATS), np.float32)
    out[:t, 0] = textures.min_lod_storage
    out[t, 0] = NO_CLAMP
    out[:t, 1] = textures.min_lod_chain
    out[:t, 2] = textures.chain_width
    out[:t, 3] = textures.chain_height
    if handles is not None and len(handles):
        out.view(np.uint32)[:t, 4:6] = np.asarray(handles, np.uint64).view(
            np.uint32).reshape(t, 2)
    if textures.vt_ids is not None and len(textures.vt_ids):
        out.view(np.uint32)[:t, 6] = (np.asarray(textures.vt_ids, np.int64) + 1).astype(
            np.uint32)
    return out


def draw_commands(mesh_of_row: np.ndarray, index_count: np.ndarray, first_index: np.ndarray,
                  base_vertex: np.ndarray) -> np.ndarray:
    """One indirect command per row, in row order: its mesh's index range, and
    baseInstance = the row (the shader's object index)."""
    n = len(mesh_of_row)
    cmds = np.empty(n, DRAW_COMMAND)
    cmds["count"] = index_count[mesh_of_row]
    cmds["instance_count"] = 1
    cmds["first_index"] = first_index[mesh_of_row]
    cmds["base_vertex"] = base_vertex[mesh_of_row]
    cmds["base_instance"] = np.arange(n, dtype=np.uint32)
    return cmds


@dataclass
class FrameLayout:
    """Where each part lies in the frame's one buffer write (byte offsets, SSBO-aligned)."""

    rows: int
    textures: int
    commands: int
    end: int

    @classmethod
    def of(cls, n_rows: int, n_textures: int, align: int) -> FrameLayout:
        up = lambda v: (v + align - 1) // align * align
        tex_at = up(max(n_rows, 1) * ROW_BYTES)
        cmd_at = up(tex_at + (n_textures + 1) * TEXTURE_FLOATS * 4)
        return cls(0, tex_at, cmd_at, cmd_at + n_rows * DRAW_COMMAND.itemsize)


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
    #: per id: virtual-texture id, or -1 (None: the provider has no virtual textures)
    vt_ids: np.ndarray | None = None

    @property
    def count(self) -> int:
        return len(self.min_lod_chain)


def virtual_slots(texture_ids: np.ndarray, vt_ids: np.ndarray | None) -> int:
    """Bit s set when some object's texture in slot s is virtual: the forward program is
    compiled with only those slots' vt_sample code (llvmpipe runs both sides of every branch
    with masks, so code for a slot that is never virtual would still cost every pixel)."""
    if vt_ids is None or not len(texture_ids):
        return 0
    ids = np.asarray(texture_ids)
    lut = np.append(np.asarray(vt_ids), -1)
    virtual = lut[np.where(ids >= 0, np.minimum(ids, len(lut) - 1), len(lut) - 1)] >= 0
    return int(sum(1 << s for s in range(ids.shape[1]) if virtual[:, s].any()))


def provider_gives_textures(provider: Any) -> bool:
    """Whether the tracker can reach the provider's GL textures (bindless needs them to make
    handles); a provider that only binds gets the bound path."""
    return isinstance(provider, ResidentTexturesSource)


class TextureTracker:
    """Reads the provider's textures and min LODs into arrays each frame, as cheaply as the
    provider allows: `resident_textures()` (engine.streaming.contract.ResidentTexturesSource),
    whose texture list is re-read only when its version moved; else one `residency()` call
    per texture (no GL textures: bound path)."""

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
        self._vt_sizes: tuple | None = None

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
        if isinstance(p, ResidentTexturesSource):
            table = p.resident_textures()
            if self._key != table.version or len(table.textures) != len(self._textures):
                self._set_textures(list(table.textures), list(table.finest))
                self._key = table.version
            chain = np.maximum(np.asarray(table.min_lod, np.float32), self._base)
        else:
            n = int(p.stats().textures)
            res = [p.residency(i) for i in range(n)]
            self._textures = [None] * n
            self._base = self._sample = np.zeros(n, np.float32)
            self._chain_w = np.array([r.chain_width for r in res], np.float32)
            self._chain_h = np.array([r.chain_height for r in res], np.float32)
            chain = np.array([r.base_level for r in res], np.float32)
        storage = chain - self._sample
        storage = np.where((storage > 1e-4) & self.shader_clamp, storage,
                           NO_CLAMP).astype(np.float32)
        vt = None
        chain_w, chain_h = self._chain_w, self._chain_h
        if isinstance(p, VirtualTextureHost):
            ids = np.asarray(p.virtual_ids(), np.int32)
            if ids.size and (ids >= 0).any():
                vt = np.full(len(chain), -1, np.int32)
                vt[:min(len(ids), len(vt))] = ids[:len(vt)]
                chain_w, chain_h = self._virtual_sizes(vt)
        return TextureState(self._textures, chain, storage, chain_w, chain_h, vt)

    def _virtual_sizes(self, vt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Chain sizes with the virtual ids' own (they have no GL texture to read it from;
        the vertex shader hands it to the fragment stage for the LOD): kept until the ids or
        the texture list change."""
        key = (vt.tobytes(), id(self._chain_w))
        if self._vt_sizes is None or self._vt_sizes[0] != key:
            w, h = self._chain_w.copy(), self._chain_h.copy()
            for i in np.flatnonzero(vt >= 0):
                if i < len(w):
                    res = self.provider.residency(int(i))
                    w[i], h[i] = res.chain_width, res.chain_height
            self._vt_sizes = (key, w, h)
        return self._vt_sizes[1], self._vt_sizes[2]


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
            # Only the attributes the program uses, the others as padding: moderngl's
            # skip_errors would try to bind built-ins such as gl_BaseInstanceARB instead.
            fmt, names = [], []
            for part, name in zip(VERTEX_FORMAT.split(), VERTEX_ATTRIBUTES):
                if name in program:
                    fmt.append(part)
                    names.append(name)
                else:
                    fmt.append(f"{int(part[:-1]) * 4}x")
            vao = self.device.vertex_array(
                program, [(self.vbo, " ".join(fmt), *names)], self.ibo,
                index_element_size=4, label="arena.vao")
            self._vaos[id(program)] = vao
        return vao

    def release(self) -> None:
        for vao in self._vaos.values():
            self.device.release(vao)
        self._vaos.clear()
        self.device.release(self.ibo)
        self.device.release(self.vbo)


def batched_source(name: str, bindless: bool, clamp_ext: bool = False,
                   vt_slots: int = 0) -> str:
    """A batched shader's source, with BINDLESS (textures from handles), LOD_CLAMP_EXT
    (textureClampARB) and VT_SLOTS (bit s: slot s may be a virtual texture, sampled through
    vt_sample) defined right after #version when asked."""
    src = shaders.load(name)
    defines = ("#define BINDLESS 1\n" if bindless else "") + \
        ("#define LOD_CLAMP_EXT 1\n" if clamp_ext else "") + \
        (f"#define VT_SLOTS {int(vt_slots)}\n" if vt_slots else "")
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
    the frame ring and indirect multi-draws. `mode`: "bindless" (handles in the texture
    rows), "bound" (a bind per texture set) or "none" (the program samples no texture: the
    feedback pass; one multi-draw)."""

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
        # runs of one command (bound path, a texture set used once) are drawn directly
        self.direct_single = True
        # small to start (it doubles when a frame needs more): under a tight budget every
        # byte held is a byte the render targets cannot have
        self.ring = FrameRing(device, 1 << 10, label=f"{label}.ring")
        self.bindless = BindlessTextures(device) if mode == "bindless" else None
        self.textures = TextureTracker(
            provider, views=mode == "bindless",
            shader_clamp=mode == "bindless" if shader_clamp is None else shader_clamp)
        self._handles = np.zeros(0, np.uint64)
        self._arena: GeometryArena | None = None
        self._static = np.zeros((0, ROW_FLOATS), np.float32)
        self._static_version = -1
        self._buf: np.ndarray | None = None
        self._layout: FrameLayout | None = None
        self._last_order: np.ndarray | None = None
        self._last_tex: tuple | None = None
        self._cull_key: tuple | None = None
        self._cull_result = np.zeros(0, np.intp)
        self._centers_t = np.zeros((3, 0), np.float32)
        self._centers_t_version = -1
        self._written: tuple | None = None  # (ring buffer, offset) of unchanged frame data
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

    def _frame_data(self, objects: ObjectArrays, order: np.ndarray, tstate: TextureState,
                    handles: np.ndarray | None, arena: GeometryArena) -> tuple[np.ndarray,
                                                                             FrameLayout]:
        """Object rows, texture rows and commands of this frame in one byte array (one
        write). Each part is rebuilt only when its inputs changed: rows when the objects
        (`objects.version`) or the draw order changed, texture rows when a clamp or handle
        moved, commands with the order. A still scene rewrites nothing but the memmove."""
        if self._static_version != objects.version:
            self._static = static_rows(objects)
            self._static_version = objects.version
            self._last_order = None
        n, t = len(order), tstate.count
        layout = FrameLayout.of(n, t, self.ring.align)
        buf = self._buf
        self._changed = False
        fresh = buf is None or self._layout != layout
        if fresh:
            buf = self._buf = np.zeros(layout.end, np.uint8)
            self._layout = layout
            self._last_order = None
            self._last_tex = None
        same_order = self._last_order is not None and np.array_equal(self._last_order, order)
        if not same_order:
            rows = buf[:n * ROW_BYTES].view(np.float32).reshape(n, ROW_FLOATS)
            if n == objects.count and (n == 0 or (order[0] == 0 and order[-1] == n - 1 and
                                                  np.all(order[1:] > order[:-1]))):
                rows[:] = self._static  # everything visible, in row order: no gather
            else:
                np.take(self._static, order, axis=0, out=rows)
            cmds = draw_commands(objects.mesh_index[order], arena.index_count,
                                 arena.first_index, arena.base_vertex)
            buf[layout.commands:layout.end] = cmds.view(np.uint8)
            self._last_order = order.copy()
            self._changed = True
        last = self._last_tex
        vt = tstate.vt_ids
        if last is None or not (np.array_equal(last[0], tstate.min_lod_storage)
                                and np.array_equal(last[1], tstate.min_lod_chain)
                                and (handles is None or np.array_equal(last[2], handles))
                                and ((vt is None and last[3] is None) or (
                                    vt is not None and last[3] is not None
                                    and np.array_equal(last[3], vt)))):
            tex = texture_rows(tstate, handles)
            buf[layout.textures:layout.textures + tex.nbytes] = tex.reshape(-1).view(np.uint8)
            self._last_tex = (tstate.min_lod_storage.copy(), tstate.min_lod_chain.copy(),
                              None if handles is None else handles.copy(),
                              None if vt is None else vt.copy())
            self._changed = True
        return buf, layout

    def _visible(self, objects: ObjectArrays, view_proj: np.ndarray, cull: bool) -> np.ndarray:
        """Indices of the objects in the frustum (the same array again while neither the
        camera nor the objects moved)."""
        key = (objects.version, cull, np.asarray(view_proj, np.float32).tobytes())
        if self._cull_key == key:
            return self._cull_result
        if not cull:
            visible = np.arange(objects.count)
        else:
            if self._centers_t_version != objects.version:
                self._centers_t = np.ascontiguousarray(objects.center.T)
                self._centers_t_version = objects.version
            visible = np.flatnonzero(cull_spheres(frustum_planes(view_proj), objects.center,
                                                  objects.radius, self._centers_t))
        self._cull_key, self._cull_result = key, visible
        return visible

    def reserve(self, objects: ObjectArrays, textures: int) -> None:
        """Make what drawing `objects` needs: the frame ring sized for every object visible
        (the most a frame can write) and the geometry arena, so a draw allocates nothing."""
        self.ring.reserve(FrameLayout.of(objects.count, textures, self.ring.align).end)
        self._arena_for(objects)

    def _order(self, objects: ObjectArrays, visible: np.ndarray,
               tstate: TextureState) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Draw order of `visible` and its groups (one draw each): by mesh in one group
        (bindless, none), or by texture set (bound)."""
        if self.mode != "bound":
            order = visible[np.argsort(objects.mesh_index[visible], kind="stable")]
            return order, [(0, len(order))] if len(order) else []
        ids = objects.texture_ids[visible]
        if tstate.vt_ids is not None:
            # virtual slots bind nothing of their own (the page cache is bound once):
            # objects differing only in virtual textures share one draw
            virtual = np.where(ids >= 0, np.append(tstate.vt_ids, -1)[ids], -1) >= 0
            ids = np.where(virtual, -1, ids)
        perm, bounds = texture_set_order(ids, tstate.count)
        return visible[perm], [(int(a), int(b)) for a, b in pairwise(bounds)]

    def draw(self, objects: ObjectArrays, program: Any, view_proj: np.ndarray,
             cull: bool = True, *, vt_program: Any | None = None,
             vt_objects: np.ndarray | None = None) -> BatchStats:
        """Cull, pack, write and draw every object with `program` into the bound
        framebuffer (the caller set the program's per-frame uniforms and the state).
        With `vt_program` and `vt_objects` (per object: samples a virtual texture), those
        objects are drawn after the others with `vt_program`: llvmpipe runs both sides of
        every branch, so the page-cache sampling would otherwise cost every pixel of the
        scene, not only the virtual textures' own."""
        st = BatchStats(objects=objects.count)
        arena = self._arena_for(objects)
        visible = self._visible(objects, view_proj, cull)
        tstate = self.textures.state()
        handles = self._handle_array(tstate) if self.mode == "bindless" else None
        split_vt = vt_program is not None and vt_objects is not None \
            and bool(np.asarray(vt_objects)[visible].any())
        if split_vt:
            virt = np.asarray(vt_objects, bool)[visible]
            order_a, groups = self._order(objects, visible[~virt], tstate)
            order_b, groups_b = self._order(objects, visible[virt], tstate)
            n_plain = len(groups)
            groups += [(a + len(order_a), b + len(order_a)) for a, b in groups_b]
            order = np.concatenate([order_a, order_b])
        else:
            order, groups = self._order(objects, visible, tstate)
            n_plain = len(groups)
        data, layout = self._frame_data(objects, order, tstate, handles, arena)
        st.visible = len(order)
        if not len(order):
            self.stats = st
            return st
        if self._changed or self._written is None or self._written[0] != self.ring.glo:
            offset = self.ring.write(data)
            st.bytes_written = data.nbytes
            self._written = (self.ring.glo, offset)
        else:  # nothing changed: the slice written last still holds this frame's data
            offset = self._written[1]
        bind_storage(self.device, 0, self.ring.glo, offset, layout.textures)
        bind_storage(self.device, 1, self.ring.glo, offset + layout.textures,
                     layout.commands - layout.textures)
        cmds = data[layout.commands:layout.end].view(DRAW_COMMAND)
        base = offset + layout.commands
        bound = self.mode == "bound"
        # plain Python values once, not numpy scalars per group (10,000 groups on llvmpipe)
        starts = [a for a, _ in groups]
        sets = objects.texture_ids[order[starts]].tolist() if bound and starts else []
        singles = cmds[starts].tolist() if self.direct_single and starts else []
        bind = self.provider.bind
        parts = [(program, range(n_plain))]
        if n_plain < len(groups):
            parts.append((vt_program, range(n_plain, len(groups))))
        for prog, group_ids in parts:
            if not len(group_ids):
                continue
            vao = arena.vertex_array(prog)
            with DrawSession(self.device, prog.glo, vao.glo, self.ring.glo) as session:
                for g in group_ids:
                    a, b = groups[g]
                    if bound:
                        for unit, tid in enumerate(sets[g]):
                            if tid >= 0:
                                bind(tid, unit)
                                st.texture_binds += 1
                    # base_instance is the row index, so a group's commands read rows a..b-1
                    if b - a == 1 and self.direct_single:
                        session.direct_values(*singles[g])
                    else:
                        session.indirect(base + a * DRAW_COMMAND.itemsize, b - a)
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


def feedback_pass(device: Any, provider: Any, shader: str, label: str) -> tuple[Any, BatchedPass]:
    """The device's program of `shader`.batched.frag.glsl behind the feedback passes' shared
    vertex stage (`Device.shared_program`: not released by the caller), and a textureless
    BatchedPass to draw it with."""
    prog = device.shared_program(vertex_shader=shaders.load("feedback.batched.vert.glsl"),
                                 fragment_shader=shaders.load(f"{shader}.batched.frag.glsl"),
                                 label=f"{label}.batched")
    return prog, BatchedPass(device, provider, mode="none", label=label)
