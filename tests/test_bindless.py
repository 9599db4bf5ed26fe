"""Bindless textures (ARB_bindless_texture): the batched frame's handle path. Skips where the
driver has no bindless textures (llvmpipe); runs on the NVIDIA device machine."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyglm import glm
from test_batch import H, W, _close, _draw, _scene
from texture_helpers import ktx2_for
from vt_helpers import headless_device

from engine.render.renderer import Renderer, RendererSettings


@pytest.fixture(scope="module")
def dev():
    from engine.gl.bindless import bindless_supported

    d = headless_device()
    if not bindless_supported(d):
        d.shutdown()
        pytest.skip("driver has no ARB_bindless_texture")
    yield d
    d.shutdown()


def _files(d: Path, n: int, size: int) -> list[Path]:
    levels = size.bit_length()
    paths = []
    for i in range(n):
        data, _ = ktx2_for("BC7_SRGB" if i % 2 == 0 else "BC7", size, size, levels=levels)
        p = d / f"t{size}_{i}.ktx2"
        p.write_bytes(data)
        paths.append(p)
    return paths


@pytest.mark.parametrize("backend", ["realloc", "sparse"])
def test_streamed_bindless_fade_in_matches_per_object(dev, tmp_path, backend) -> None:
    """The shader's fade clamp against the sampler's, frame by frame (frames in which a
    texture was reallocated are skipped: see test_batch's streamed test)."""
    from engine.streaming.levels.streamer import LevelStreamer

    if backend == "sparse" and not dev.caps.sparse_texture:
        pytest.skip("no ARB_sparse_texture")
    files = _files(tmp_path, 6, 512 if backend == "sparse" else 64)
    with dev.leak_check():
        provider = LevelStreamer(dev, backend=backend, max_tail_size=8)
        scene = _scene(dev, provider, files)
        rs = [Renderer(dev, provider, (W, H), settings=RendererSettings(path="per_object")),
              Renderer(dev, provider, (W, H))]
        assert rs[1].texture_mode == "bindless"
        worst, compared, changes = 0.0, 0, 0
        for f in range(40):
            provider.grant(256 << 20)
            before = provider.residency_changes
            provider.begin_frame(rs[0].frame_view(scene, f, f / 60))
            imgs = [_draw(dev, r, scene) for r in rs]
            provider.end_frame()
            if provider.residency_changes == before:
                worst = max(worst, _close(imgs[0], imgs[1]))
                compared += 1
        changes = provider.residency_changes
        for r in rs:
            r.release()
        scene.release()
        provider.release()
    assert changes > 0 and compared > 10
    assert worst <= 0.001


def test_handles_never_outlive_textures_over_thousands_of_residency_changes(
        dev, tmp_path) -> None:
    """Grow and shrink every texture again and again (the pool alternates between room for
    everything and room for the tails only): each reallocation makes a new texture, whose
    handle the renderer makes before drawing, and the old texture's handle goes with it."""
    from engine.render.camera import Camera
    from engine.render.material import Material
    from engine.render.mesh import Mesh, quad
    from engine.render.scene import Scene
    from engine.streaming.levels.streamer import LevelStreamer

    files = _files(tmp_path, 64, 64)
    with dev.leak_check():
        provider = LevelStreamer(dev, backend="realloc", max_tail_size=4)
        scene = Scene(dev)
        panel = scene.add_mesh(Mesh(dev, quad(1.0, 1.0)))
        for i, p in enumerate(files):
            tid = provider.register(p.stem, p)
            scene.add(panel, Material(p.stem, albedo=tid),
                      glm.translate(glm.vec3((i % 8) - 3.5, (i // 8) - 3.5, 0)))
        scene.camera = Camera(position=glm.vec3(0, 0, 4.5), target=glm.vec3(0, 0, 0))
        r = Renderer(dev, provider, (512, 512))
        frame = 0
        while provider.residency_changes < 2000 and frame < 600:
            provider.grant((64 << 20) if (frame // 6) % 2 == 0 else 1)
            provider.begin_frame(r.frame_view(scene, frame, frame / 60))
            _draw(dev, r, scene)
            provider.end_frame()
            frame += 1
            live = dev.live_objects()
            handles = [rec for rec in live if rec.type == "texture_handle"]
            textures = {id(rec.obj) for rec in live if rec.type == "texture"}
            assert all(id(h.obj.texture) in textures for h in handles)
            assert all(not h.obj.texture.released for h in handles)
            assert len(handles) <= len(files)
        changes = provider.residency_changes
        made = r._batch.bindless.made
        r.release()
        scene.release()
        provider.release()
    assert changes >= 2000, f"only {changes} residency changes in {frame} frames"
    assert made >= changes // 2  # reallocated textures got new handles
