"""The batched frame (issue 11): pure parts (culling, grouping, row packing, incremental
object arrays) without GL, then pictures and counts on llvmpipe, where the batched path runs
its bound-texture fallback (llvmpipe has no bindless textures)."""
from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from pyglm import glm
from texture_helpers import ktx2_for

from engine.render.batch import (
    NO_CLAMP,
    ROW_BYTES,
    ROW_FLOATS,
    FrameLayout,
    TextureState,
    pack_rows,
    texture_rows,
    texture_set_order,
)
from engine.render.camera import Camera, mat_to_numpy
from engine.render.material import Material
from engine.render.objects import FLAG_ALBEDO, FLAG_NORMAL, ObjectArrays
from engine.render.renderer import RendererSettings, choose_path, choose_texture_mode
from engine.streaming.culling import cull_spheres, frustum_planes
from driver_needs import BATCHED, require


# ---------------------------------------------------------------------- pure
def _view_proj(cam: Camera, aspect: float = 4 / 3) -> np.ndarray:
    return mat_to_numpy(cam.proj_matrix(aspect) * cam.view_matrix())


def test_frustum_culling_keeps_what_the_camera_sees() -> None:
    cam = Camera(position=glm.vec3(0, 0, 5), target=glm.vec3(0, 0, 0), far=100.0)
    planes = frustum_planes(_view_proj(cam))
    centers = np.array([[0, 0, 0],      # straight ahead
                        [0, 0, 10],     # behind the camera
                        [50, 0, 0],     # far to the side
                        [4.5, 0, 0],    # just outside the side plane, but its sphere reaches in
                        [0, 0, -200],   # beyond the far plane
                        [0, 0, -94]],   # just inside the far plane (99 away)
                       np.float32)
    radii = np.array([1, 1, 1, 2.5, 1, 0.5], np.float32)
    assert cull_spheres(planes, centers, radii).tolist() == [True, False, False, True, False,
                                                             True]
    # with a tiny radius the side sphere is out: the radius is what kept it
    assert not cull_spheres(planes, centers[3:4], np.array([0.01], np.float32))[0]
    assert cull_spheres(planes, np.zeros((0, 3)), np.zeros(0)).shape == (0,)


def test_texture_sets_are_drawn_in_runs() -> None:
    ids = np.array([[3, -1, -1], [1, 2, -1], [3, -1, -1], [1, 2, -1], [-1, -1, -1]], np.int32)
    order, bounds = texture_set_order(ids, texture_count=4)
    runs = [ids[order[a:b]] for a, b in pairwise(bounds)]
    assert len(runs) == 3  # three distinct sets
    for run in runs:
        assert (run == run[0]).all()
    assert sorted(order.tolist()) == list(range(5))


def _scene_arrays(n: int) -> tuple[ObjectArrays, list, list[Material]]:
    from engine.render.mesh import MeshData, quad

    class FakeMesh:  # bounds and UV density are all the table reads of a mesh
        def __init__(self, data: MeshData) -> None:
            self.data = data
            self.center, self.radius = data.bounds()
            self.uv_density = data.uv_density()

    from engine.render.scene import Instance

    mesh = FakeMesh(quad(2.0, 1.0))
    mats = [Material("a", albedo=0, albedo_factor=(1, 0.5, 0.25, 1)),
            Material("b", albedo=1, normal=2, roughness=0.3)]
    insts = [Instance(mesh, mats[i % 2], glm.translate(glm.vec3(i, 0, -i))
                      * glm.scale(glm.vec3(1 + i, 1, 1))) for i in range(n)]
    table = ObjectArrays()
    table.sync(insts)
    return table, insts, mats


def test_object_arrays_match_the_instances_and_follow_changes() -> None:
    table, insts, mats = _scene_arrays(5)
    for i, inst in enumerate(insts):
        assert np.allclose(table.center[i], tuple(inst.center), atol=1e-5)
        assert table.radius[i] == pytest.approx(inst.radius, rel=1e-5)
        assert table.uv_density[i] == pytest.approx(inst.uv_density, rel=1e-5)
        assert np.allclose(table.model[i], np.array(inst.model.to_list()).reshape(16))
        nm = glm.mat3(glm.transpose(glm.inverse(inst.model)))
        assert np.allclose(table.normal[i].reshape(3, 4)[:, :3], np.array(nm.to_list()),
                           atol=1e-5)
    assert table.texture_ids[:, 0].tolist() == [0, 1, 0, 1, 0]
    version = table.version
    insts[3].model = glm.translate(glm.vec3(0, 7, 0))  # one row changes
    table.sync(insts)
    assert table.version > version
    assert np.allclose(table.center[3], tuple(insts[3].center))
    mats[1].albedo = 9  # a material changes: its rows' texture ids follow
    table.sync(insts)
    assert table.texture_ids[:, 0].tolist() == [0, 9, 0, 9, 0]
    insts.append(type(insts[0])(insts[0].mesh, mats[0]))  # a new instance: rebuilt
    table.sync(insts)
    assert table.count == 6


def test_a_material_change_rebuilds_only_the_scenes_that_use_it() -> None:
    mine, mine_insts, mats = _scene_arrays(2)
    other, other_insts, _ = _scene_arrays(2)  # its own materials
    mine_version, other_version = mine.version, other.version
    mats[0].roughness = 0.9
    mine.sync(mine_insts)
    other.sync(other_insts)
    assert mine.version > mine_version and mine.material_rows[0, 4] == pytest.approx(0.9)
    assert other.version == other_version  # untouched: nothing of it was recomputed


def test_rows_carry_material_textures_and_clamps() -> None:
    table, _, _ = _scene_arrays(4)
    rows = pack_rows(table, np.array([1, 0]))
    assert rows.shape == (2, ROW_FLOATS)
    flags = rows.view(np.uint32)[:, 35]
    assert flags.tolist() == [FLAG_ALBEDO | FLAG_NORMAL, FLAG_ALBEDO]
    assert rows.view(np.int32)[:, 40:44].tolist() == [[1, 2, -1, -1], [0, -1, -1, -1]]
    assert tuple(rows[1, 28:32]) == (1, 0.5, 0.25, 1)
    assert tuple(rows[0, 44:52]) == (1, 0, 0, 0, 0, 1, 0, 0)  # identity UV transform
    tex = TextureState(textures=[None] * 3,
                       min_lod_chain=np.array([2.5, 0.0, 0.0], np.float32),
                       min_lod_storage=np.array([0.5, NO_CLAMP, NO_CLAMP], np.float32),
                       chain_width=np.array([256, 64, 64], np.float32),
                       chain_height=np.array([128, 64, 64], np.float32))
    trows = texture_rows(tex, np.array([0, 77, 1 << 40], np.uint64))
    assert trows.shape == (4, 8)  # one per texture id, plus a spare
    assert tuple(trows[0, :4]) == (0.5, 2.5, 256, 128)
    assert trows[1, 0] == NO_CLAMP
    assert trows.view(np.uint64)[:3, 2].tolist() == [0, 77, 1 << 40]


def test_frame_layout_aligns_every_storage_block() -> None:
    lay = FrameLayout.of(n_rows=3, n_textures=5, align=256)
    assert lay.rows == 0 and lay.textures % 256 == 0 and lay.commands % 256 == 0
    assert lay.textures >= 3 * ROW_BYTES and lay.commands >= lay.textures + 6 * 32
    assert lay.end == lay.commands + 3 * 20


def test_path_and_texture_mode_choice() -> None:
    s = RendererSettings()
    assert s.path == "batched"
    assert choose_path(s, True) == "batched"
    assert choose_path(s, False) == "per_object"
    assert choose_path(RendererSettings(path="per_object"), True) == "per_object"
    assert choose_texture_mode(s, bindless_available=True) == "bindless"
    assert choose_texture_mode(RendererSettings(force_bound=True), True) == "bound"
    assert choose_texture_mode(s, bindless_available=False) == "bound"
    # a provider whose GL textures the renderer cannot reach (it only binds): bound path
    assert choose_texture_mode(s, bindless_available=True, provider_ok=False) == "bound"


# ---------------------------------------------------------------------- GL (llvmpipe)
W, H = 160, 120


@pytest.fixture(scope="module")
def texture_files(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("batch-textures")
    paths = []
    for i in range(6):
        data, _ = ktx2_for("BC1_RGB_SRGB" if i % 2 == 0 else "BC1_RGB", 64, 64, levels=7)
        p = d / f"t{i}.ktx2"
        p.write_bytes(data)
        paths.append(p)
    return paths


def _scene(dev, provider, paths):
    from engine.render.mesh import Mesh, box, quad
    from engine.render.scene import PointLight, Scene

    scene = Scene(dev)
    panel = scene.add_mesh(Mesh(dev, quad(1.6, 1.6), label="panel"))
    cube = scene.add_mesh(Mesh(dev, box((0.8, 0.8, 0.8)), label="cube"))
    ids = [provider.register(p.stem, p) for p in paths]
    for i in range(12):
        mat = Material(f"m{i}", albedo=ids[i % len(ids)],
                       normal=ids[(i + 1) % len(ids)] if i % 3 == 0 else -1,
                       roughness=0.3 + 0.05 * i)
        x, z = (i % 4) * 1.9 - 2.85, -(i // 4) * 2.5 - 1.0
        model = glm.translate(glm.vec3(x, 1.6, z)) * glm.rotate(0.3 * i, glm.vec3(0, 1, 0))
        scene.add(panel if i % 2 else cube, mat, model)
    scene.add(panel, Material("off-screen", albedo=ids[0]), glm.translate(glm.vec3(0, 0, 40)))
    scene.point_lights = [PointLight((0.0, 3.0, -2.0), (1.0, 0.9, 0.8), 6.0, 12.0)]
    scene.camera = Camera(position=glm.vec3(0, 1.8, 3.5), target=glm.vec3(0, 1.4, -3))
    return scene


def _draw(dev, renderer, scene) -> np.ndarray:
    renderer.render(scene)
    renderer.present()
    dev.finish()
    return renderer.read_output()


def _close(a: np.ndarray, b: np.ndarray, frac: float = 0.001) -> float:
    d = np.abs(a.astype(int) - b.astype(int)).max(axis=2)
    return float((d > 5).mean())


@pytest.mark.slow
@pytest.mark.parametrize("view", ["lit", "mip"])
@pytest.mark.needs(BATCHED)
def test_batched_picture_equals_per_object(dev, texture_files, view) -> None:
    """Every way to draw gives one picture: the per-object path, the batched path with bound
    textures (forced where the driver has bindless) and, where the driver has it, bindless."""
    from engine.gl.bindless import bindless_supported
    from engine.render.renderer import Renderer
    from engine.streaming.static import StaticTextureProvider

    ways = {"per_object": RendererSettings(path="per_object"),
            "bound": RendererSettings(path="batched", force_bound=True)}
    if bindless_supported(dev):
        ways["bindless"] = RendererSettings(path="batched")
    with dev.leak_check():
        provider = StaticTextureProvider(dev)
        scene = _scene(dev, provider, texture_files)
        images, stats = {}, {}
        for name, settings in ways.items():
            r = Renderer(dev, provider, (W, H), settings=settings)
            r.view_mode = view
            images[name] = _draw(dev, r, scene)
            stats[name] = r.frame_stats()
            r.release()
        scene.release()
        provider.release()
    for name in ways:
        assert images[name].std() > 5  # a real picture, not a clear colour
        assert _close(images["per_object"], images[name]) <= 0.001, name
    st = stats["bound"]
    assert st["render_path"] == "batched" and st["texture_mode"] == "bound"
    assert st["visible_objects"] == 12  # the off-screen panel was culled
    # bound fallback: one multi-draw per texture set, never one per object
    sets = {(i % 6, (i + 1) % 6 if i % 3 == 0 else -1) for i in range(12)}
    assert st["draw_calls"] == len(sets) < 12
    if "bindless" in stats:
        st = stats["bindless"]
        assert st["texture_mode"] == "bindless"
        assert st["draw_calls"] == 1  # the whole scene in one multi-draw
        assert st["texture_binds"] == 0
        assert st["texture_handles"] == 6


@pytest.mark.slow
@pytest.mark.needs(BATCHED)
def test_forced_fallback_by_capability_injection(dev, texture_files, monkeypatch) -> None:
    """llvmpipe lacks bindless: pretend it has it, and check that `force_bound` keeps the
    renderer on the bound path (and renders the same picture), while without the flag the
    renderer would have chosen bindless."""
    import engine.render.renderer as renderer_mod
    from engine.render.renderer import Renderer
    from engine.streaming.static import StaticTextureProvider

    chosen = []
    real = renderer_mod.choose_texture_mode

    def spy(settings, available, provider_ok=True):
        mode = real(settings, available, provider_ok)
        chosen.append((available, mode))
        return mode

    monkeypatch.setattr(renderer_mod, "bindless_supported", lambda device: True)
    monkeypatch.setattr(renderer_mod, "choose_texture_mode", spy)
    provider = StaticTextureProvider(dev)
    scene = _scene(dev, provider, texture_files)
    r = Renderer(dev, provider, (W, H), settings=RendererSettings(force_bound=True))
    forced = _draw(dev, r, scene)
    assert r.texture_mode == "bound" and chosen[-1] == (True, "bound")
    r.release()
    assert real(RendererSettings(), True) == "bindless"
    r = Renderer(dev, provider, (W, H), settings=RendererSettings(path="per_object"))
    ref = _draw(dev, r, scene)
    r.release()
    scene.release()
    provider.release()
    assert _close(ref, forced) <= 0.001


@pytest.mark.slow
@pytest.mark.needs(BATCHED)
def test_streamed_fade_in_same_picture_on_both_paths(dev, texture_files) -> None:
    """The streamer fades levels in through the sampler's min LOD; the batched path's shader
    clamp (what bindless needs) must give the same picture. Same frames, same provider state:
    the bound path exactly; the shader clamp within the render-diff tolerance, except in the
    frame a texture is reallocated: the streamer sets the new texture's sampler min LOD only
    from the next fade step, so the per-object path shows the new level unclamped for that one
    frame (a pop the shader clamp does not have); those frames are not compared."""
    from engine.render.renderer import Renderer
    from engine.streaming.levels.streamer import LevelStreamer

    now = [0.0]  # a frame clock and inline reads: the fades depend on the frame number only
    with dev.leak_check():
        provider = LevelStreamer(dev, backend="realloc", max_tail_size=8, io_workers=0,
                                   clock=lambda: now[0])
        scene = _scene(dev, provider, texture_files)
        settings = [RendererSettings(path="per_object"), RendererSettings(force_bound=True),
                    RendererSettings(force_bound=True, shader_lod_clamp=True)]
        rs = [Renderer(dev, provider, (W, H), settings=s) for s in settings]
        worst = [0.0, 0.0, 0.0]
        fading = 0
        for f in range(30):
            now[0] = f / 60
            provider.grant(64 << 20)
            before = provider.residency_changes
            provider.begin_frame(rs[0].frame_view(scene, f, f / 60))
            imgs = [_draw(dev, r, scene) for r in rs]
            provider.end_frame()
            lods = np.asarray(provider.sampling.lods)
            fading += int(np.any(np.abs(lods - np.round(lods)) > 1e-3))
            worst[1] = max(worst[1], _close(imgs[0], imgs[1]))
            if provider.residency_changes == before:
                worst[2] = max(worst[2], _close(imgs[0], imgs[2]))
            if provider.residency_changes >= 6 and f > 15 and not fading:
                break
        changes = provider.residency_changes
        for r in rs:
            r.release()
        scene.release()
        provider.release()
    assert changes > 0 and fading > 0  # levels really streamed in and faded
    assert worst[1] == 0.0
    assert worst[2] <= 0.001


@pytest.mark.needs(BATCHED)
def test_one_buffer_write_per_frame_and_ring_reuse(dev, texture_files) -> None:
    from engine.render.renderer import Renderer
    from engine.streaming.static import StaticTextureProvider

    with dev.leak_check():
        provider = StaticTextureProvider(dev)
        scene = _scene(dev, provider, texture_files)
        r = Renderer(dev, provider, (W, H), settings=RendererSettings(force_bound=True))
        for _ in range(7):
            _draw(dev, r, scene)
        ring = r._batch.ring
        assert ring.writes == 1 and ring.waits == 0  # a still scene: written once
        scene.instances[0].model = glm.translate(glm.vec3(0.5, 1.6, -1.0))
        image = _draw(dev, r, scene)
        assert ring.writes == 2  # an object moved: one more write
        scene.camera.position = glm.vec3(0.3, 1.8, 3.5)
        assert not np.array_equal(_draw(dev, r, scene), image)
        assert ring.writes == 2  # the camera moved, every object stays in view: no write
        kinds = {rec.type for rec in dev.live_objects()}
        assert {"fence", "query"} <= kinds  # ring fences and timer queries are tracked
        stats = r.frame_stats()
        r.release()
        scene.release()
        provider.release()
    assert stats["gpu_ms"] is not None and stats["gpu_ms"] > 0
    assert stats["render_cpu_ms"] > 0


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.needs(BATCHED)
def test_frame_ring_grows_and_releases_everything(dev, persistent) -> None:
    from engine.gl.buffers import FrameRing

    if persistent and not dev.caps.buffer_storage:
        require(dev, "ARB_buffer_storage")
    with dev.leak_check():
        ring = FrameRing(dev, 1024, persistent=persistent, label="test-ring")
        offsets = []
        for i in range(5):
            offsets.append(ring.write(np.full(300, i, np.uint8)))
            ring.end_frame()
        before = ring.slice_bytes
        ring.write(np.zeros(5000, np.uint8))
        ring.end_frame()
        assert ring.slice_bytes >= 5000 > before
        assert dev.ledger.by_category().get("buffer", 0) >= ring.size
        ring.release()
    if persistent:
        assert offsets[:4] == [0, before, 2 * before, 0]
    else:
        assert set(offsets) == {0}


@pytest.mark.needs(BATCHED)
def test_feedback_pass_batched_equals_its_instance_loop(dev, texture_files) -> None:
    """The GPU feedback pass through the batched path reports the same finest level per
    texture as its per-instance loop (same fragments, ids and chain sizes from the rows)."""
    from engine.render.feedback import FeedbackPass
    from engine.streaming.static import StaticTextureProvider

    with dev.leak_check():
        provider = StaticTextureProvider(dev)
        scene = _scene(dev, provider, texture_files)
        out = {}
        for batched in (False, True):
            fb = FeedbackPass(dev, provider, every=1, batched=batched)
            assert (fb._batch is not None) == batched
            assert fb.render(scene, (W * 4, H * 4), 0)
            dev.finish()
            out[batched] = fb.poll()
            fb.release()
        scene.release()
        provider.release()
    assert out[True] is not None and np.isfinite(out[True]).sum() >= 5
    assert np.array_equal(out[False], out[True])


def test_hud_shows_cpu_and_gpu_time(dev) -> None:
    from engine.diagnostics.hud import Hud

    hud = Hud(dev)
    try:
        base = {"budget_bytes": 1 << 20, "total_bytes": 1 << 19}  # no "ms": no new graph bar
        plain = len(hud.layout((640, 360), base).quads)
        timed = len(hud.layout((640, 360), {**base, "cpu_ms": 3.25, "gpu_ms": 7.5}).quads)
    finally:
        hud.release()
    # "cpu 3.2   gpu 7.5": one quad per visible glyph
    assert timed - plain == len("cpu 3.2gpu 7.5".replace(" ", ""))


def test_gpu_timer_reports_each_frame_late_and_plausibly(dev) -> None:
    from engine.gl.timing import GpuTimer

    with dev.leak_check():
        timer = GpuTimer(dev, depth=3)
        fbo = dev.framebuffer([dev.texture((64, 64), label="timer-target")], label="timer-fbo")
        for f in range(8):
            timer.begin(f)
            fbo.use()
            fbo.clear(0.1 * f, 0, 0, 1)
            timer.end()
            dev.finish()
        timer.poll()
        frames = [f for f, _ in timer.results]
        assert frames == sorted(frames) and len(frames) + timer.dropped == 8
        assert all(0 <= ms < 60_000 for _, ms in timer.results)
        assert timer.latest_frame == 7
        tex = fbo.color_attachments[0]
        dev.release(fbo)
        dev.release(tex)
        timer.release()
