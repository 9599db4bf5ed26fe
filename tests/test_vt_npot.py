"""Virtual textures of any 2D size on llvmpipe: a non-power-of-two texture and one larger
than the driver's largest texture (a driver limit lowered through the capabilities: the
virtual address space is the page table, not a GL texture) draw GL's trilinear picture of
the whole texture when their tiles are resident, and GL's picture at a coarser minimum
level of detail when the finer tiles are missing; filtering crosses tile edges exactly."""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from texture_helpers import encode

from engine import textures
from engine.gl.upload import upload_texture_file
from engine.gl.vt import QuadBatch, set_wrap
from engine.render.imagecompare import compare
from engine.streaming.virtual.quads import QuadRenderer, quad_vertices, view_projection
from engine.streaming.virtual import keys as tile_keys
from engine.streaming.virtual.system import VirtualTextureSystem
from engine.textures.ktx2_write import write_ktx2

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
# slow: the module's three chains (one wider than 1024) are drawn by several flights
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("isolated_cache")]

SIZE = (320, 240)
CORNERS = np.array([(-1, -1, 0), (1, -1, 0), (1, 1, 0), (-1, 1, 0)], np.float32)
OBLIQUE = view_projection((0.6, 0.3, 1.2), (0.0, 0.2, -0.5), SIZE[0] / SIZE[1])
NEAR = view_projection((0.25, 0.1, 0.35), (0.0, 0.0, -0.5), SIZE[0] / SIZE[1])


def rect_file(directory, name: str, w: int, h: int, seed: int):
    """A w x h BC1 file with its whole chain (GL's level sizes: halved and floored); BC1, as
    llvmpipe samples it far faster than BC7."""
    path = directory / name
    levels = int(np.log2(max(w, h))) + 1
    chain = [encode("BC1_RGB", max(1, w >> lv), max(1, h >> lv), seed=seed * 31 + lv)
             for lv in range(levels)]
    write_ktx2(path, "BC1_RGB", w, h, chain)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vtnpot")
    # 600x360: levels 300x180, 150x90, 75x45 ... no level halves into whole tiles.
    # 1400x900: wider than the 1024 texels the "driver" below allows.
    # 257x257: level 0's last tile row and column have no parent of their own (level 1 is
    # 128 wide: one tile), so their ancestor is the clamped one.
    return {"npot": rect_file(d, "npot.ktx2", 600, 360, 5),
            "edge": rect_file(d, "edge.ktx2", 257, 257, 7),
            "huge": rect_file(d, "huge.ktx2", 1400, 900, 6)}


@pytest.fixture
def renderer(dev):
    r = QuadRenderer(dev, SIZE)
    yield r
    r.release()


@pytest.fixture
def small_driver(dev):
    """The device reports a GL_MAX_TEXTURE_SIZE of 1024 while the system is built and fed
    (its cache then holds 7 x 7 slots); the reference is uploaded after the real limit is
    back."""
    real = dev.caps

    def lower():
        dev.caps = dataclasses.replace(real, max_texture_size=1024)

    def restore():
        dev.caps = real

    yield lower, restore
    dev.caps = real


def _reference(dev, path, levels, wrap):
    ref = upload_texture_file(dev, textures.open(path), last_level=levels - 1)
    set_wrap(dev, ref, wrap == "repeat")
    return ref


def _draw(dev, renderer, path, wrap, min_level, view, before_reference=lambda: None,
          feedback=False):
    """(virtual picture, GL at min LOD `min_level`, GL at full detail) of one quad."""
    vts = VirtualTextureSystem(dev, 8 << 20)
    quads = ref = None
    try:
        vt = vts.register(path, wrap=wrap)
        quads = QuadBatch(dev, quad_vertices(CORNERS, vt, 2.0 if wrap == "repeat" else 1.0))
        if feedback:  # the tiles the view asks for (all of them may not fit the cache)
            # 12 frames at least; then as long as the I/O threads take (a loaded machine)
            deadline = time.monotonic() + 20.0
            frame = 0
            while frame < 12 or (vts.wanted_resident_fraction() < 1.0
                                 and time.monotonic() < deadline):
                vts.begin_frame(frame)
                vts.update()
                renderer.draw_feedback(vts, quads, view, frame)
                frame += 1
                if frame >= 12:
                    time.sleep(0.01)
            assert vts.wanted_resident_fraction() == 1.0
        else:
            assert vts.preload(vts.all_tiles(vt, min_level=min_level), timeout=20)
        if min_level:
            assert not vts.is_resident(vts.key(vt, min_level - 1, 0, 0))
        virtual = renderer.draw_virtual(vts, quads, view)
        before_reference()
        ref = _reference(dev, path, vts.textures[vt].layout.levels, wrap)
        dev.commands.set_min_lod(ref, float(min_level))
        expected = renderer.draw_reference(quads, view, [ref], [vt])
        dev.commands.set_min_lod(ref, 0.0)
        full = renderer.draw_reference(quads, view, [ref], [vt])
        return virtual, expected, full
    finally:
        if quads is not None:
            quads.release()
        dev.release(ref)
        vts.release()


@pytest.mark.parametrize("name", ["npot", "edge"])
@pytest.mark.needs("GLSL 4.00")  # equal to GL's own trilinear filtering
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_npot_resident_equals_gl_trilinear(dev, files, renderer, name):
    """Clamped (the repeat seam of a level whose size is not a whole number of blocks is a
    documented limit: tiles.py)."""
    with dev.leak_check():
        virtual, expected, _ = _draw(dev, renderer, files[name], "clamp", 0, OBLIQUE)
    result = compare(virtual[..., :3], expected[..., :3])
    assert result.ok, str(result)
    assert (expected[..., :3].max(-1) > 0).mean() > 0.9


@pytest.mark.parametrize(("name", "k"), [("npot", 1), ("npot", 2), ("edge", 1)])
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_npot_missing_fine_tiles_show_the_coarser_level(dev, files, renderer, name, k):
    with dev.leak_check():
        virtual, expected, full = _draw(dev, renderer, files[name], "clamp", k, NEAR)
    result = compare(virtual[..., :3], expected[..., :3])
    assert result.ok, str(result)
    assert not compare(virtual[..., :3], full[..., :3]).ok


@pytest.mark.parametrize("k", [0, 2])
@pytest.mark.needs("GLSL 4.00")  # equal to GL's own trilinear filtering
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_larger_than_the_driver_maximum(dev, files, renderer, small_driver, k):
    lower, restore = small_driver
    lower()
    with dev.leak_check():
        virtual, expected, full = _draw(dev, renderer, files["huge"], "clamp", k,
                                        OBLIQUE if k == 0 else NEAR, before_reference=restore,
                                        feedback=k == 0)
    result = compare(virtual[..., :3], expected[..., :3])
    assert result.ok, str(result)
    if k:
        assert not compare(virtual[..., :3], full[..., :3]).ok


@pytest.mark.needs("GLSL 4.00")  # equal to GL's own trilinear filtering
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_a_65536_texture_wider_than_any_key_of_before(dev, renderer, tmp_path):
    """512 tiles a side (the key's old 8 bits held 256): a 65536^2 BC1 file, sparse and
    periodic, its viewed window real, draws GL's trilinear picture of its 256^2 period with
    repeat wrap at 256x the UV, across level-0 tile edges (UV 0.5 is one)."""
    from vt_helpers import sparse_periodic_ktx2
    big, period = 65536, 256
    small = [encode("BC1_RGBA", period >> lv, period >> lv, seed=90 + lv)
             for lv in range(period.bit_length())]
    path = sparse_periodic_ktx2(tmp_path / "wide.ktx2", "BC1_RGBA", big, small, period,
                                (0.48, 0.52), levels=5)
    small_path = tmp_path / "period.ktx2"
    write_ktx2(small_path, "BC1_RGBA", period, period, small)
    corners = CORNERS * np.float32([100.0, 100.0, 1.0])  # UV 0..1 over 200 units
    view = view_projection((0.4, 0.3, 0.9), (0.0, 0.0, 0.0), SIZE[0] / SIZE[1])
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 8 << 20, tiled_dir=False)  # no 2.8 GB copy
        quads = ref_quads = ref = None
        try:
            vt = vts.register(path, wrap="clamp")
            assert vts.textures[vt].layout.grid(0) == (512, 512)
            quads = QuadBatch(dev, quad_vertices(corners, vt, 1.0))
            for frame in range(60):
                vts.begin_frame(frame)
                vts.update()
                renderer.draw_feedback(vts, quads, view, frame)
                if frame > 4 and vts.wanted_resident_fraction() == 1.0:
                    break
            assert vts.wanted_resident_fraction() == 1.0
            keys = vts.last_feedback[0]
            assert tile_keys.unpack(keys)[2].max() >= 256  # tiles past the old 8-bit x
            virtual = renderer.draw_virtual(vts, quads, view)
            ref = _reference(dev, small_path, period.bit_length() - 2, "repeat")
            ref_quads = QuadBatch(dev, quad_vertices(corners, 0, big / period))
            expected = renderer.draw_reference(ref_quads, view, [ref], [0])
        finally:
            for q in (quads, ref_quads):
                if q is not None:
                    q.release()
            dev.release(ref)
            vts.release()
    result = compare(virtual[..., :3], expected[..., :3])
    assert result.ok, str(result)
    assert (expected[..., :3].max(-1) > 0).mean() > 0.9
