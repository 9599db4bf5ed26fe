"""Virtual textures in a scene: the streaming provider mixes whole-level and virtual textures.

(a) a scene with both kinds, run deterministic to a settled frame, renders the picture the
    all-resident static provider renders (within the render-diff tolerance);
(b) under a moving, binding budget (the pressure demo's curve, and seeded random budget
    steps with random camera jumps) no frame ends or peaks over its budget, nothing leaks,
    and the page cache is in the ledger's texture.streamed category and in ProviderStats;
(c) the per-texture decision and the pool split (pure).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyglm import glm

from engine.app.loop import FrameContext
from engine.hosts.run import run_scene
from engine.formats import get as format_named
from engine.gl.device import Device
from engine.render.batch import virtual_slots
from engine.render.imagecompare import compare
from engine.render.material import Material
from engine.render.mesh import Mesh, quad
from engine.render.renderer import Renderer, RendererSettings
from engine.render.scene import Scene
from engine.streaming.contract import TextureProvider
from engine.streaming.inline_io import InlineLevelIO
from engine.memory.split import MIN_STREAM_SLOTS, settle_allowance, split_pool
from engine.streaming.provider import StreamingProvider, decide_virtual
from engine.streaming.settings import StreamerSettings
from engine.streaming.static import StaticTextureProvider
from engine.testing import assert_no_leaks

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.needs("BC1_RGB sampling")]

W, H = 160, 120
BIG, SMALL = 256, 64  # virtual at virtual_min_size=BIG; whole levels
MIXED = StreamerSettings(virtual_min_size=BIG)


@pytest.fixture(scope="module")
def assets(generated_assets: Path) -> dict[str, list[Path]]:
    from engine.demos.gallery_assets import gallery_textures

    cache = generated_assets / "gallery"
    return {"big": gallery_textures(4, BIG, "bc1", cache_dir=cache, progress=False).paths,
            "small": gallery_textures(4, SMALL, "bc1", cache_dir=cache, progress=False).paths}


def mixed_scene(assets: dict[str, list[Path]]):
    """Eight panels at different depths and angles, big (virtual) and small (whole-level)
    textures alternating; the camera still, so frame N is a settled picture."""
    def build(device: Device, provider: TextureProvider, options: Mapping[str, Any]) -> Scene:
        scene = Scene(device)
        try:
            panel = scene.add_mesh(Mesh(device, quad(1.0, 1.0), label="panel"))
            for i in range(8):
                path = assets["big" if i % 2 == 0 else "small"][i // 2]
                tid = provider.register(f"{path.parent.name}/{path.stem}", path)
                mat = Material(path.stem, albedo=tid, roughness=0.6)
                scene.materials.append(mat)
                x, y = (i % 4) - 1.5, 0.6 if i < 4 else -0.6
                model = glm.translate(glm.vec3(x * 1.1, y, -2.5 - 0.3 * (i % 3))) * \
                    glm.rotate(glm.radians(20.0 * ((i % 3) - 1)), glm.vec3(0, 1, 0))
                scene.add(panel, mat, model)
            scene.camera.position = glm.vec3(0, 0, 0.5)
            scene.camera.target = glm.vec3(0, 0, -3)
        except BaseException:
            scene.release()
            raise
        return scene
    return build


def _fixed_bytes(ctx: FrameContext) -> int:
    """What neither the streamer nor the render scale can give back."""
    ledger = ctx.device.ledger
    return ledger.total - ctx.renderer.target_bytes - ledger.category_total("texture.streamed")


def _floor_bytes(ctx: FrameContext) -> int:
    """The least a frame can hold: fixed bytes, every streaming floor (the whole levels'
    tails, the page cache's minimum) and the targets at 5/8 scale."""
    targets = ctx.renderer.cost_spec.bytes_at(*ctx.renderer.output_size, 0.625)
    return _fixed_bytes(ctx) + ctx.provider.stats().min_bytes + targets


class VtProbe:
    """Per frame: the page cache's bytes and tiles, and the provider's stats."""

    def __init__(self) -> None:
        self.rows: list[dict[str, int]] = []
        self.virtual: list[int] = []

    def __call__(self, ctx: FrameContext) -> None:
        p = ctx.provider
        assert isinstance(p, StreamingProvider)
        vts = p.virtual_system()
        assert vts is not None
        self.virtual = [int(v) for v in p.virtual_ids()]
        st = p.stats()
        self.rows.append({
            "frame": ctx.frame, "cache_bytes": vts.nbytes,
            "streamed": int(ctx.device.ledger.category_total("texture.streamed")),
            "resident": st.resident_bytes, "min": st.min_bytes, "wanted": st.wanted_bytes,
            "whole_resident": p.levels.stats().resident_bytes,
            "tiles": vts.resident_tiles(), "uploads": vts.stats.tiles_uploaded,
            "allowance": p.cache_allowance, "total": int(ctx.record["total_bytes"]),
            "budget": int(ctx.record["budget_bytes"]), "missing": st.missing_tiles,
            "scale": ctx.renderer.render_scale,
        })


# ---------------------------------------------------------------------- (a) the picture
@pytest.mark.slow
def test_mixed_scene_settles_to_the_all_resident_picture(device: Device, assets) -> None:
    factory = mixed_scene(assets)
    static = run_scene(factory, frames=8, size=(W, H), device=device, provider="static",
                       budget="256MiB")
    assert_no_leaks(static)
    runs, probes = [], []
    for _ in range(2):
        probe = VtProbe()
        runs.append(run_scene(factory, frames=8, size=(W, H), device=device,
                              provider="streaming", budget="256MiB", deterministic=True,
                              streamer=MIXED, on_frame=[probe]))
        probes.append(probe)
        assert_no_leaks(runs[-1])
    probe = probes[0]
    # both kinds in the scene: the big textures virtual, the small ones by whole levels
    assert probe.virtual == [0, -1, 1, -1, 2, -1, 3, -1]
    # tiles streamed in after the first feedback readback; frame 0 has only the pinned ones:
    # each of the 4 virtual textures' coarsest level (4 texels), packed in a cell
    pinned = 4
    assert probe.rows[0]["tiles"] == pinned and probe.rows[-1]["tiles"] > pinned
    assert sum(r["uploads"] for r in probe.rows) == probe.rows[-1]["tiles"] - pinned
    first, second = (r.image for r in runs)
    assert (first == second).all()  # deterministic: the same picture on every run
    result = compare(first, static.image)
    assert result.ok, f"settled mixed frame differs from the static one: {result}"
    # while the tiles were still missing (frame 0: coarsest tiles only) it did differ
    early = run_scene(factory, frames=1, size=(W, H), device=device, provider="streaming",
                      budget="256MiB", deterministic=True, streamer=MIXED)
    assert not compare(early.image, static.image).ok


@pytest.mark.needs("compute shaders")
def test_the_feedback_reduced_on_the_gpu_gives_the_same_frames(device: Device,
                                                                assets) -> None:
    """A GPU driver's default (the profile's `feedback_reduce == "gpu"`): the renderer's
    feedback pass is reduced by the compute pass, priced with the targets, and the
    deterministic run draws every frame as the CPU reduction's run does."""
    factory = mixed_scene(assets)
    kw = dict(frames=8, size=(W, H), device=device, provider="streaming", budget="256MiB",
              deterministic=True, streamer=MIXED)
    frames: dict[str, list[np.ndarray]] = {"cpu": [], "gpu": []}
    listed: list[bool] = []

    def keep(path: str):
        def hook(ctx: FrameContext) -> None:
            frames[path].append(ctx.renderer.output_fbo.read(components=3))
            if path == "gpu":
                reducer = ctx.provider.virtual_system().feedback.reducer
                listed.append(reducer is not None and reducer.spilled_frames == 0)
        return hook
    cpu = run_scene(factory, on_frame=[keep("cpu")], **kw)
    saved = device.profile
    device.profile = replace(saved, feedback_reduce="gpu")
    try:
        gpu = run_scene(factory, on_frame=[keep("gpu")], **kw)
    finally:
        device.profile = saved
    assert_no_leaks(gpu)
    assert all(listed) and len(listed) == 8
    assert not any(f["over_budget"] for f in gpu.frames)
    assert all(a == b for a, b in zip(frames["cpu"], frames["gpu"], strict=True))
    assert (cpu.image == gpu.image).all()


def test_whole_level_feedback_pass_with_virtual_textures_in_the_mix(device: Device,
                                                                    assets) -> None:
    """The whole-level GPU feedback pass (`feedback=True`) names composite ids; the mixed
    provider hands the streamer its own ids' share, and the picture still settles."""
    factory = mixed_scene(assets)
    seen: list[np.ndarray] = []

    def hook(ctx: FrameContext) -> None:
        fb = ctx.provider.feedback_mips
        if fb is not None:
            seen.append(fb.copy())

    run = run_scene(factory, frames=8, size=(W, H), device=device, provider="streaming",
                    budget="256MiB", deterministic=True, streamer=MIXED, feedback=True,
                    on_frame=[hook])
    static = run_scene(factory, frames=1, size=(W, H), device=device, provider="static",
                       budget="256MiB")
    assert_no_leaks(run)
    assert seen and all(len(f) == 4 for f in seen)  # the four whole-level textures only
    assert np.isfinite(seen[-1]).all()  # each of them seen by the feedback pass
    assert compare(run.image, static.image).ok


def test_off_streams_everything_by_whole_levels(device: Device, assets) -> None:
    """virtual="off": the plain streamer, and the same settled picture."""
    factory = mixed_scene(assets)
    off = run_scene(factory, frames=6, size=(W, H), device=device, provider="streaming",
                    budget="256MiB", deterministic=True,
                    streamer=StreamerSettings(virtual="off"))
    static = run_scene(factory, frames=1, size=(W, H), device=device, provider="static",
                       budget="256MiB")
    assert_no_leaks(off)
    assert off.frames[-1]["by_category"].get("texture.streamed", 0) > 0
    assert compare(off.image, static.image).ok


@pytest.mark.slow
@pytest.mark.parametrize("path", ["per_object", "batched"])
def test_both_render_paths_sample_virtual_textures(device: Device, assets, path: str) -> None:
    """The renderer driven directly (no frame loop) on each path: the per-object path's GLSL
    3.30 vt_sample takes the exact-maths LOD (measured: 3 of 19,200 pixels off by 7 here),
    the batched one the driver's own (max difference 1); both within the tolerance."""
    def run(provider, frames: int) -> np.ndarray:
        scene = mixed_scene(assets)(device, provider, {})
        renderer = Renderer(device, provider, (W, H), settings=RendererSettings(path=path))
        try:
            for f in range(frames):
                if isinstance(provider, StreamingProvider):
                    provider.grant(64 << 20)
                provider.begin_frame(renderer.frame_view(scene, f, f / 60))
                renderer.render(scene)
                renderer.present()
                provider.end_frame()
                device.finish()
            return renderer.read_output()
        finally:
            renderer.release()
            scene.release()
            provider.release()

    static = run(StaticTextureProvider(device), 1)
    mixed = run(StreamingProvider(device, MIXED, io=InlineLevelIO, deterministic=True), 8)
    result = compare(mixed, static)
    assert result.ok, result


@pytest.mark.slow
def test_gallery_textures_of_1024_go_virtual_under_auto(device: Device,
                                                         user_cache: Path) -> None:
    """The gallery demo itself with the default settings ("auto"): its 1024^2 textures are
    all virtual, the streamed category holds the page cache alone, and frame 20 of the
    (slowed) flight is the static picture. The four 1024^2 BC7 files are the first of the
    quick virtual bench's set in the user's cache (tests/test_bench.py)."""
    from engine.demos import DEMOS

    demo = DEMOS["gallery"]
    opts = {"count": 4, "texture_size": 1024, "speed": 0.01, "cache_dir": user_cache / "gallery"}
    seen: dict[str, Any] = {}

    def hook(ctx: FrameContext) -> None:
        vts = ctx.provider.virtual_system()
        seen["virtual"] = [int(v) for v in ctx.provider.virtual_ids()]
        seen["cache"] = vts.nbytes
        seen["streamed"] = ctx.record["by_category"]["texture.streamed"]

    streamed = run_scene(demo.factory, frames=20, size=(W, H), device=device,
                         provider="streaming", budget="256MiB", deterministic=True,
                         options=opts, on_frame=[hook])
    static = run_scene(demo.factory, frames=20, size=(W, H), device=device,
                       provider="static", budget="256MiB", options=opts)
    assert_no_leaks(streamed)
    assert seen["virtual"] == [0, 1, 2, 3]
    assert seen["streamed"] == seen["cache"] > 0
    result = compare(streamed.image, static.image)
    assert result.ok, result


# ---------------------------------------------------------------------- (b) under pressure
def test_pressure_with_virtual_textures_stays_in_budget(device: Device, assets) -> None:
    from engine.demos import DEMOS
    from engine.demos.pressure import LOW

    period = 24
    options = {"period": period, "pressure_from": "start", "step_frames": 3}
    pressure = DEMOS["pressure"].hooks(options)[0]
    probe = VtProbe()

    def script(ctx: FrameContext) -> None:
        if ctx.frame == 0:
            # the low of the curve leaves room for every floor
            ctx.governor.set_budget(int(_floor_bytes(ctx) / LOW))
        pressure(ctx)

    # a page cache allowed 32x the screen's need, so at full budget it is more than its
    # minimum and the pool's low must take it back down
    result = run_scene(mixed_scene(assets), frames=period + 4, size=(W, H), device=device,
                       provider="streaming", budget="1GiB", deterministic=True,
                       streamer=replace(MIXED, virtual_screen_factor=32.0),
                       on_frame=[script, probe])
    assert_no_leaks(result)
    frames = result.frames
    assert min(f["budget_fraction"] for f in frames) == LOW  # the budget did bind
    for prev, f in pairwise(frames[1:]):
        assert f["total_bytes"] <= f["budget_bytes"], f"frame {f['frame']} over budget"
        # within the frame too: a cache rebuild releases the old cache before the new one
        assert f["peak_bytes"] <= max(f["budget_bytes"], prev["total_bytes"]), f
    for row in probe.rows:
        # the page cache is ledgered as streamed memory and counted by the provider
        assert row["cache_bytes"] > 0
        assert row["streamed"] >= row["cache_bytes"]
        assert row["resident"] == row["whole_resident"] + row["cache_bytes"]
        assert row["cache_bytes"] <= row["allowance"]
        assert row["min"] >= row["cache_bytes"] or row["allowance"] > row["min"]
    # the split moved with the pool: the cache shrank at the low and grew back
    allowances = [r["allowance"] for r in probe.rows]
    low = [r["allowance"] for r, f in zip(probe.rows, frames, strict=True)
           if f["budget_fraction"] == LOW]
    assert max(low) < allowances[-1] and max(low) < allowances[1]
    # after the rebuilds the screen's tiles are all back (at the render scale the budget's
    # end holds: a floor-relative budget need not hold full scale once the pressure passed)
    end = probe.rows[-1]
    assert end["missing"] == 0 and end["tiles"] > 4
    assert end["tiles"] == max(r["tiles"] for r in probe.rows if r["scale"] == end["scale"])


@pytest.mark.parametrize("seed", [3, 11])
def test_random_camera_and_budget_steps_with_virtual_textures(device: Device, assets,
                                                              seed: int) -> None:
    """Seeded random camera jumps and budget steps (between the least that fits and plenty):
    every frame ends within its budget and peaks within max(budget, what the frame before
    held); nothing leaks; held still at the end with room, the picture settles to the static
    one from the same camera."""
    rng = np.random.default_rng(seed)
    # The settle phase outlasts the resolution policy's longest rise hold after the
    # budget flapped (32 frames: back-offs quadruple it), so the scale is back at 1.
    frames, settle = 80, 40
    cams = [(glm.vec3(*rng.uniform((-1.5, -0.8, -1.0), (1.5, 0.8, 0.8))),
             glm.vec3(*rng.uniform((-1.5, -0.6, -3.0), (1.5, 0.6, -2.4)))) for _ in range(8)]
    final_cam = cams[-1]
    limits: dict[str, int] = {}
    probe = VtProbe()

    def script(ctx: FrameContext) -> None:
        if ctx.frame == 0:
            stats = ctx.provider.stats()
            limits["low"] = _floor_bytes(ctx)
            limits["high"] = _fixed_bytes(ctx) + 2 * (stats.wanted_bytes
                                                      + ctx.renderer.target_bytes)
        if ctx.frame >= frames - settle:
            ctx.governor.set_budget(256 << 20)  # room for everything: scale back to 1
            cam = final_cam
        elif ctx.frame % 4 == 0:
            ctx.governor.set_budget(int(rng.uniform(limits["low"], limits["high"])))
            cam = cams[int(rng.integers(len(cams)))]
        else:
            return
        ctx.scene.camera.position, ctx.scene.camera.target = cam

    result = run_scene(mixed_scene(assets), frames=frames, size=(W, H), device=device,
                       provider="streaming", budget="1GiB", deterministic=True,
                       streamer=replace(MIXED, virtual_screen_factor=32.0),
                       on_frame=[script, probe])
    assert_no_leaks(result)
    # it was exercised: the budget bound (the pool below what the textures wanted), the
    # cache's allowance moved, and tiles arrived; a cache that holds what the screen needs
    # keeps its tiles through allowance changes (it is sized by the need, not remade)
    assert any(f["pool_bytes"] < f["texture_wanted_bytes"] for f in result.frames)
    assert len({r["allowance"] for r in probe.rows}) > 1
    assert sum(r["uploads"] for r in probe.rows) > 0
    assert all(r["cache_bytes"] <= max(r["allowance"], prev["cache_bytes"])
               for prev, r in pairwise(probe.rows))
    for prev, f in pairwise(result.frames[1:]):
        assert f["total_bytes"] <= f["budget_bytes"], f"frame {f['frame']} over budget"
        assert f["peak_bytes"] <= max(f["budget_bytes"], prev["total_bytes"]), f

    def still(device: Device, provider: TextureProvider, options: Mapping[str, Any]) -> Scene:
        scene = mixed_scene(assets)(device, provider, options)
        scene.camera.position, scene.camera.target = final_cam
        return scene

    print("RS", [(f["frame"], f["render_scale"], f["texture_wanted_bytes"]>>10, f["pool_bytes"]>>10, f["total_bytes"]>>10) for f in result.frames[-18:]])
    assert result.frames[-1]["render_scale"] == 1.0  # settled: no upscale in the picture
    static = run_scene(still, frames=1, size=(W, H), device=device, provider="static",
                       budget="256MiB")
    assert compare(result.image, static.image).ok, compare(result.image, static.image)


# ---------------------------------------------------------------------- (c) pure policy
def test_decide_virtual_per_texture() -> None:
    bc7, bc1 = format_named("BC7"), format_named("BC1_RGBA")
    rgba8 = format_named("RGBA8")
    auto = lambda w, h, fmt=bc7, vt=None, **kw: decide_virtual(
        "auto", w, h, fmt, is_2d=True, vt_format=vt, **kw)
    assert auto(4096, 4096) and auto(1024, 256) and auto(2048, 1024)
    assert not auto(512, 512) and not auto(256, 256)  # small: whole levels
    assert auto(3000, 3000) and auto(1024, 1000) and auto(12000, 9000)  # any size
    assert auto(512, 512, min_size=512)
    assert not auto(4096, 4096, vt=bc1)  # one page cache, one format
    assert auto(4096, 4096, bc1, vt=bc1)
    assert not auto(4096, 4096, rgba8)  # uncompressed: no 4x4 blocks to tile
    assert not decide_virtual("auto", 4096, 4096, bc7, is_2d=False, vt_format=None)
    assert not decide_virtual("off", 4096, 4096, bc7, is_2d=True, vt_format=None)
    assert decide_virtual("always", 64, 64, bc7, is_2d=True, vt_format=None)
    assert decide_virtual("always", 96, 64, bc7, is_2d=True, vt_format=None)


def test_split_pool_follows_the_screen_not_the_pool() -> None:
    vt_min, screen = 1 << 20, 2 << 20
    # a large pool: the cache gets its screen-proportional cap, the rest goes to whole levels
    assert split_pool(512 << 20, 8 << 20, vt_min, screen, 8.0) == 16 << 20
    # a pool that cannot hold the cap: the room left after the whole-level tails
    assert split_pool(20 << 20, 8 << 20, vt_min, screen, 8.0) == 12 << 20
    # never below the cache's own minimum (the governor's floor includes it)
    assert split_pool(4 << 20, 8 << 20, vt_min, screen, 8.0) == vt_min
    assert split_pool(512 << 20, 0, vt_min, 0, 8.0) == vt_min


def test_settle_allowance_rebuilds_only_when_worth_it() -> None:
    assert settle_allowance(0, 100, 1000) == 100  # first grant
    assert settle_allowance(100, 110, 1000) == 100  # a small move: keep the cache
    assert settle_allowance(100, 130, 1000) == 130  # grew past a quarter: rebuild
    assert settle_allowance(100, 40, 1000) == 40  # shrank by half
    assert settle_allowance(100, 90, 95) == 90  # the pool no longer holds it: must shrink


def test_min_stream_slots_is_positive() -> None:
    assert MIN_STREAM_SLOTS >= 1


def test_virtual_slots_name_only_the_slots_that_are_virtual() -> None:
    """The forward program gets vt_sample code only for slots some object samples
    virtually (measured on llvmpipe, gallery of 4 x 1024^2 at 480x270: the scene pass took
    483 ms with code for all three slots in one program for every object, 171 ms with the
    albedo's alone, 24 ms with that program for the virtual objects only, 22 ms static;
    llvmpipe runs both sides of every branch)."""
    vt = np.array([-1, 0, -1, 1], np.int32)  # provider ids 1 and 3 are virtual
    ids = np.array([[0, -1, -1], [1, 2, -1], [2, -1, 3]], np.int32)
    assert virtual_slots(ids, vt) == 0b101
    assert virtual_slots(ids[:1], vt) == 0
    assert virtual_slots(ids, None) == 0
    assert virtual_slots(np.zeros((0, 3), np.int32), vt) == 0

def test_split_pool_grows_to_a_starved_screens_demand_within_the_room() -> None:
    vt_min, screen = 1 << 20, 2 << 20
    # many textures shown at once need more whole tiles than 8x the pixels: the demand wins
    assert split_pool(512 << 20, 8 << 20, vt_min, screen, 8.0, demand=40 << 20) == 40 << 20
    # ... but never past the room the whole-level tails leave
    assert split_pool(30 << 20, 8 << 20, vt_min, screen, 8.0, demand=40 << 20) == 22 << 20
    # a demand below the screen cap changes nothing
    assert split_pool(512 << 20, 8 << 20, vt_min, screen, 8.0, demand=4 << 20) == 16 << 20
