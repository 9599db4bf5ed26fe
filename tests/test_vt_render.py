"""Virtual textures on llvmpipe: the same picture as GL's trilinear filtering of the fully
resident texture (tile edges and the wrap seam included), a coarser but correct picture with
tiles missing, the feedback loop end to end, and budget/leak checks."""
from __future__ import annotations

import numpy as np
import pytest
from vt_helpers import chain_file

from engine import textures
from engine.gl.upload import upload_texture_file
from engine.gl.vt import VT_CATEGORY, QuadBatch, set_wrap
from engine.render.imagecompare import compare
from engine.streaming.virtual.quads import (
    QuadRenderer,
    quad_vertices,
    view_projection,
    wall,
)
from engine.streaming.virtual.system import VirtualTextureSystem
from engine.streaming.virtual.tiles import TAIL_CLASS_SHIFT, slot_bytes

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.needs("BC1_RGB sampling")]

SIZE = (320, 240)
CORNERS = np.array([(-1, -1, 0), (1, -1, 0), (1, 1, 0), (-1, 1, 0)], np.float32)
# An oblique view: magnified texels near the camera, several levels of minification behind,
# so trilinear blends across levels and bilinear crosses tile edges everywhere.
OBLIQUE = view_projection((0.6, 0.3, 1.2), (0.0, 0.2, -0.5), SIZE[0] / SIZE[1])
# Closer: level 0 magnified in front, so a missing level 0 or 1 shows.
NEAR = view_projection((0.25, 0.1, 0.35), (0.0, 0.0, -0.5), SIZE[0] / SIZE[1])


@pytest.fixture(scope="module")
def tex512(tmp_path_factory):
    return chain_file(tmp_path_factory.mktemp("vt"), "t512.ktx2", 512, seed=3)


@pytest.fixture
def renderer(dev):
    r = QuadRenderer(dev, SIZE)
    yield r
    r.release()


def _reference(dev, path, levels, wrap):
    ref = upload_texture_file(dev, textures.open(path), last_level=levels - 1)
    set_wrap(dev, ref, wrap == "repeat")
    return ref


@pytest.mark.parametrize(("wrap", "uv_scale"), [("repeat", 2.0), ("clamp", 1.0),
                                                ("repeat", 3.0)])
@pytest.mark.needs("GLSL 4.00")
def test_all_tiles_resident_equals_gl_trilinear(dev, tex512, renderer, wrap, uv_scale):
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 8 << 20)
        quads = ref = None
        try:
            vt = vts.register(tex512, wrap=wrap)
            assert vts.preload(vts.all_tiles(vt), timeout=20)
            quads = QuadBatch(dev, quad_vertices(CORNERS, vt, uv_scale))
            ref = _reference(dev, tex512, vts.textures[vt].layout.levels, wrap)
            virtual = renderer.draw_virtual(vts, quads, OBLIQUE)
            expected = renderer.draw_reference(quads, OBLIQUE, [ref], [vt])
            result = compare(virtual[..., :3], expected[..., :3])
            assert result.ok, str(result)
            assert result.max_difference <= 2  # measured: 1 on llvmpipe
            assert (expected[..., :3].max(-1) > 0).mean() > 0.9  # the quad fills the view
        finally:
            if quads is not None:
                quads.release()
            dev.release(ref)
            vts.release()


@pytest.mark.parametrize("k", [1, 2, 4])
def test_missing_fine_tiles_show_the_coarser_level_exactly(dev, tex512, renderer, k):
    """Only levels >= k resident: the picture is GL's with GL_TEXTURE_MIN_LOD = k (what the
    fallback to the finest resident ancestor must give): no black, no seams, no garbage."""
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 8 << 20)
        try:
            vt = vts.register(tex512, wrap="repeat")
            assert vts.preload(vts.all_tiles(vt, min_level=k), timeout=20)
            assert not vts.is_resident(vts.key(vt, k - 1, 0, 0))
            quads = QuadBatch(dev, quad_vertices(CORNERS, vt, 2.0))
            ref = _reference(dev, tex512, vts.textures[vt].layout.levels, "repeat")
            try:
                virtual = renderer.draw_virtual(vts, quads, NEAR)
                dev.commands.set_min_lod(ref, float(k))
                expected = renderer.draw_reference(quads, NEAR, [ref], [vt])
                dev.commands.set_min_lod(ref, 0.0)
                full = renderer.draw_reference(quads, NEAR, [ref], [vt])
            finally:
                quads.release()
                dev.release(ref)
            result = compare(virtual[..., :3], expected[..., :3])
            assert result.ok, str(result)
            # And it is really coarser than the full-detail picture somewhere.
            assert not compare(virtual[..., :3], full[..., :3]).ok
        finally:
            vts.release()


def test_only_the_pinned_small_levels_still_draw_the_texture(dev, tex512, renderer):
    """Nothing streamed: the coarsest level (packed in a cell, pinned at registration)
    draws GL's picture at that level; the other small levels (32 texels and less) are cells
    too, each size class in slots of its own, but they stream."""
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 1 << 20)
        try:
            vt = vts.register(tex512, wrap="repeat")
            lay = vts.textures[vt].layout
            packed = lay.packed_levels()
            assert [lv for lv, _ in packed] == [4, 5, 6, 7]  # 32, 16, 8 and 4 texels
            vts.update()
            quads = QuadBatch(dev, quad_vertices(CORNERS, vt, 2.0))
            ref = _reference(dev, tex512, lay.levels, "repeat")
            try:
                virtual = renderer.draw_virtual(vts, quads, OBLIQUE)
                dev.commands.set_min_lod(ref, float(packed[-1][0]))
                expected = renderer.draw_reference(quads, OBLIQUE, [ref], [vt])
            finally:
                quads.release()
                dev.release(ref)
            assert compare(virtual[..., :3], expected[..., :3]).ok
            assert vts.resident_tiles() == 1 and vts.tail_slots == 4  # one a class
        finally:
            vts.release()


@pytest.mark.slow
@pytest.mark.needs("GLSL 4.00")  # equal to GL's own trilinear filtering
def test_feedback_loop_settles_on_the_full_picture_within_budget(dev, tmp_path_factory,
                                                                renderer):
    """Four textures on a wall, seen obliquely; only feedback drives residency. Within a few
    frames the picture equals the fully resident one, and the cache (ledgered as the
    streaming pool) never exceeds its allowance."""
    d = tmp_path_factory.mktemp("vtwall")
    paths = [chain_file(d, f"w{i}.ktx2", 512, seed=10 + i) for i in range(4)]
    allowance = 4 << 20
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, allowance, max_uploads=64)
        refs, quads = [], None
        try:
            vts_ids = [vts.register(p) for p in paths]
            quads = QuadBatch(dev, wall(2, 2, vts_ids, size=1.0, gap=0.1))
            vp = view_projection((0.8, 0.4, 1.1), (0.0, 0.0, -0.3), SIZE[0] / SIZE[1])
            image = None
            for frame in range(40):
                vts.begin_frame(frame)
                vts.update()
                image = renderer.draw_virtual(vts, quads, vp)
                renderer.draw_feedback(vts, quads, vp, frame)
                streamed = dev.ledger.by_category().get(VT_CATEGORY, 0)
                assert vts.nbytes <= allowance and streamed >= vts.nbytes
            levels = vts.textures[0].layout.levels
            refs = [_reference(dev, p, levels, "repeat") for p in paths]
            expected = renderer.draw_reference(quads, vp, refs, vts_ids)
            result = compare(image[..., :3], expected[..., :3])
            assert result.ok, str(result)
            content = sum(p.stat().st_size for p in paths)
            assert vts.resident_tiles() * slot_bytes(vts.fmt) < content
        finally:
            if quads is not None:
                quads.release()
            for r in refs:
                dev.release(r)
            vts.release()


@pytest.mark.needs("GLSL 4.00")  # equal to GL's own trilinear filtering
def test_cache_follows_the_need_within_the_allowance(dev, tex512, renderer):
    """The allowance is a ceiling: the cache starts at what a small screen needs, grows as
    more tiles are shown (keeping the ones it holds: copied on the GPU, not re-read), shrinks
    at once below a smaller allowance, and still draws exactly the GL reference."""
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 8 << 20)
        quads = ref = None
        try:
            vt = vts.register(tex512, wrap="repeat")
            vts.fit_screen(256, 144)
            vts.update()
            small = vts.cache.slots
            assert vts.nbytes < (8 << 20) // 4
            assert vts.preload(vts.all_tiles(vt, min_level=1), timeout=20)
            assert vts.preload(vts.all_tiles(vt), timeout=20)
            grown, held = vts.cache.slots, vts.resident_tiles()
            assert vts.stats.in_hand == 0  # every tile read found its slot
            assert all(np.prod(vts._grid(t)) >= t for t in range(1, 400))
            assert grown > small and vts.resizes >= 1
            assert vts.nbytes < (8 << 20) // 2  # the need, not the allowance
            vts.set_allowance(vts.nbytes - 1)
            assert vts.cache.slots < grown and vts.nbytes <= vts.allowance
            assert 0 < vts.resident_tiles() <= held
            assert vts.preload(vts.all_tiles(vt), timeout=20)
            quads = QuadBatch(dev, quad_vertices(CORNERS, vt, 1.0))
            ref = _reference(dev, tex512, vts.textures[vt].layout.levels, "repeat")
            result = compare(renderer.draw_virtual(vts, quads, OBLIQUE)[..., :3],
                             renderer.draw_reference(quads, OBLIQUE, [ref], [vt])[..., :3])
            assert result.ok and result.max_difference <= 2, str(result)
        finally:
            if quads is not None:
                quads.release()
            if ref is not None:
                dev.release(ref)
            vts.release()


def test_ledger_sees_the_cache_next_to_whole_level_textures(dev, tex512, tmp_path):
    """Virtual and whole-level textures in one device: the ledger's streaming category
    grows by exactly the cache + table + proxy bytes the system reports, the static
    category by the resident texture, and releasing the system gives all of it back."""
    other = chain_file(tmp_path, "static.ktx2", 256, seed=8)
    with dev.leak_check():
        before = dict(dev.ledger.by_category())
        static = upload_texture_file(dev, textures.open(other))
        vts = VirtualTextureSystem(dev, 2 << 20)
        try:
            vts.register(tex512)
            vts.update()
            now = dev.ledger.by_category()
            grew = now.get(VT_CATEGORY, 0) - before.get(VT_CATEGORY, 0)
            assert grew == vts.nbytes and 0 < vts.nbytes <= 2 << 20
            assert now.get("texture.static", 0) - before.get("texture.static", 0) == \
                static.nbytes
        finally:
            vts.release()
            dev.release(static)
        after = dev.ledger.by_category()
        assert after.get(VT_CATEGORY, 0) == before.get(VT_CATEGORY, 0)


@pytest.mark.needs("GLSL 4.00")
def test_non_square_small_levels_pack_by_their_longer_side_and_draw_like_gl(dev, tmp_path,
                                                                          renderer):
    """512x128: levels 4 (32x8) and 5 (16x4) share slots in cells of the class of their
    longer side (32 and 16 texels); the picture still equals GL trilinear."""
    from texture_helpers import encode

    from engine.textures.ktx2_write import write_ktx2
    path = tmp_path / "wide.ktx2"
    chain = [encode("BC7", max(1, 512 >> i), max(1, 128 >> i), seed=70 + i) for i in range(10)]
    write_ktx2(path, "BC7", 512, 128, chain)
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 4 << 20)
        quads = ref = None
        try:
            vt = vts.register(path, wrap="repeat")
            assert vts.textures[vt].layout.levels == 6
            lay = vts.textures[vt].layout
            assert sorted(k for _, k in lay.packed_levels()) == [2, 3]
            # the coarsest pinned in its cell, the 32x8 level streams into a cell
            assert sorted(code >> TAIL_CLASS_SHIFT for code in vts.tails.values()) == [2]
            assert vts.preload(vts.all_tiles(vt), timeout=20)
            quads = QuadBatch(dev, quad_vertices(CORNERS, vt, 2.0))
            ref = _reference(dev, path, 6, "repeat")
            virtual = renderer.draw_virtual(vts, quads, OBLIQUE)
            expected = renderer.draw_reference(quads, OBLIQUE, [ref], [vt])
            result = compare(virtual[..., :3], expected[..., :3])
            assert result.ok, str(result)
        finally:
            if quads is not None:
                quads.release()
            dev.release(ref)
            vts.release()
