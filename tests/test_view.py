"""`engine view` and the ImageWall API: the user's real files shown upright, at their aspect
ratio, with detail where zoomed, inside the budget and without leaks; unreadable files
reported and skipped. Pure parts (layout, order, navigation, discovery, decoding) are tested
without GL."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.hosts.run import run_scene
from engine.view import cache
from engine.view.decode import decode_upright, probe
from engine.view.discover import discover
from engine.view.layout import Rect, chunk_grid, justified_rows
from engine.view.navigator import Navigator
from engine.view.priority import ViewRect, fill_order
from engine.view.wall import ImageView, ImageWall
from view_helpers import corners_match, marked, write_mixed

ROOT = Path(__file__).resolve().parents[1]
SIZE = (640, 360)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[Path, dict[str, tuple[int, int]]]:
    folder = tmp_path_factory.mktemp("mixed")
    return folder, write_mixed(folder)


# ----------------------------------------------------------------------------- pure parts
def test_justified_rows_keep_aspect_and_do_not_overlap():
    aspects = [1.5, 0.75, 1.0, 2.0, 1.33, 0.5, 1.78, 1.0, 3.0]
    rects = justified_rows(aspects)
    assert len(rects) == len(aspects)
    for a, r in zip(aspects, rects):
        assert r.width / r.height == pytest.approx(a, rel=1e-9)
    for i, r in enumerate(rects):
        for s in rects[i + 1:]:
            assert r.x1 <= s.x0 + 1e-9 or s.x1 <= r.x0 + 1e-9 or \
                r.y1 <= s.y0 + 1e-9 or s.y1 <= r.y0 + 1e-9


def test_chunk_grid_tiles_the_image_edge_to_edge():
    boxes = chunk_grid(1000, 600, 256)
    assert len(boxes) == 4 * 3
    area = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes)
    assert area == 1000 * 600
    assert all(x1 - x0 <= 256 and y1 - y0 <= 256 for x0, y0, x1, y1 in boxes)


def test_detail_order_puts_the_largest_visible_first():
    view = ViewRect(0, 0, 10, 10, 720)
    rects = [Rect(50, 50, 51, 51), Rect(1, 1, 2, 2), Rect(2, 2, 6, 6), Rect(12, 0, 13, 1)]
    assert fill_order([0] * 4, rects, view) == [2, 1, 3, 0]


def test_navigator_zoom_keeps_the_point_under_the_cursor():
    nav = Navigator.fitting(Rect(-8, -4.5, 8, 4.5))
    before = nav.world_at((0.5, -0.3))
    nav.zoom(3, (0.5, -0.3))
    assert nav.world_at((0.5, -0.3)) == pytest.approx(before)
    nav.drag(10, 0)
    assert nav.world_at((0.5, -0.3))[0] < before[0]


def test_discover_walks_folders_globs_and_reports_what_is_missing(mixed, tmp_path):
    folder, sizes = mixed
    found = discover([str(folder), str(folder / "*.png"), str(tmp_path / "nope"),
                      str(tmp_path / "*.jpg")])
    names = {str(p.relative_to(folder)) for p in found.files}
    assert set(sizes) | {"broken.jpg"} == names  # the .png matches were already there
    assert [why for _, why in found.problems] == ["no such file or folder",
                                                  "the pattern matches no image"]


def test_decode_is_upright_in_srgb_for_every_kind(mixed):
    folder, sizes = mixed
    for name, (w, h) in sizes.items():
        if name.endswith(".ktx2"):
            continue  # a GPU texture: registered as it is, not decoded
        info = probe(folder / name)
        assert (info.width, info.height) == (w, h), name
        rgba = decode_upright(folder / name)
        assert rgba.shape == (h, w, 4), name
        q = min(w, h) // 8
        tl, br = rgba[q, q, :3].astype(int), rgba[h - q, w - q, :3].astype(int)
        if name.startswith(("k16", "h16")) or "grey" in name:
            continue
        assert np.abs(tl - (255, 0, 0)).max() < 40, (name, tl)
        assert np.abs(br - (255, 255, 0)).max() < 40, (name, br)


def test_fast_thumbnail_decode_is_small_and_upright(mixed):
    folder, _ = mixed
    small = decode_upright(folder / "i_rot6.jpg", 64)
    assert small.shape == (48, 64, 4)
    assert np.abs(small[4, 4, :3].astype(int) - (255, 0, 0)).max() < 50


def test_bomb_limit_names_the_option(tmp_path):
    from PIL import Image

    from engine.errors import TextureFormatError

    Image.fromarray(marked(300, 200)).save(tmp_path / "big.png")
    with pytest.raises(TextureFormatError, match="--max-pixels"):
        decode_upright(tmp_path / "big.png", max_pixels=50_000)
    assert decode_upright(tmp_path / "big.png", max_pixels=60_000).shape == (200, 300, 4)


def test_failed_thumbnail_leaves_no_folder(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n nope")
    root = tmp_path / "cache"
    entry = cache.entry_dir(bad, root)
    result = cache.make_thumbnail(str(bad), str(entry), 64, "bc1")
    assert isinstance(result, cache.Failed) and not root.exists()


def test_strips_read_what_pillow_reads(mixed, tmp_path):
    """libvips's strips (the `huge` extra) are the same upright sRGB pixels as Pillow's
    whole decode, and the staging file made from them is too."""
    from engine.textures import strips

    if not strips.available():
        pytest.skip("pyvips not installed (the 'huge' extra)")
    folder, _ = mixed
    for name in ("a.jpg", "b.png", "d.webp", "e.gif", "g.tif", "h_rgba.png"):
        w, h, rows = strips.strips(folder / name, 1 << 30, rows=48)
        got = np.concatenate([r for _, r in rows])
        assert np.array_equal(got, decode_upright(folder / name)), name
    entry = tmp_path / "c" / "ab" / "entry"
    assert isinstance(cache.stage_upright(str(folder / "b.png"), str(entry), "bc1", 64), float)
    whole = decode_upright(folder / "b.png")
    for k, (x0, y0, x1, y1) in enumerate(chunk_grid(150, 200, 64)):
        raw = entry / "bc1-64" / "staging" / f"c{k}.rgba"
        got = np.fromfile(raw, np.uint8).reshape(y1 - y0, x1 - x0, 4)
        assert np.array_equal(got, whole[y0:y1, x0:x1]), k


def test_benchmark_data_is_distinct_readable_files(tmp_path):
    """lab/view_data.py (device_view.sh's data) at a small size."""
    from lab import view_data

    paths = view_data.photos(tmp_path / "p", 3, 64, 48)
    assert len({p.read_bytes() for p in paths}) == 3
    assert all(probe(p).width == 64 for p in paths)
    assert len({cache.entry_dir(p, tmp_path) for p in paths}) == 3
    big = view_data.huge(tmp_path / "h.png", 512)
    assert decode_upright(big)[10, 10, :3].tolist() == [255, 0, 0]


def test_warm_start_reads_the_index_and_a_changed_file_misses(tmp_path, monkeypatch):
    """The second run of a folder takes each file's size and cache folder from the one
    index file (no meta.json read); an edited file gets a new thumbnail at its new size, and
    an index that cannot be read only sends the files down the slow path."""
    from PIL import Image

    folder, root = tmp_path / "photos", tmp_path / "cache"
    folder.mkdir()
    for i, size in enumerate([(96, 64), (64, 96), (80, 80)]):
        Image.fromarray(marked(*size)).save(folder / f"p{i}.jpg", quality=90)
    first = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    index = json.loads((root / cache.Index.NAME).read_text())
    assert len(index) == 3
    monkeypatch.setattr(cache, "read_meta", lambda entry: pytest.fail("meta.json read"))
    warm = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    assert [(it.width, it.height, it.entry) for it in warm.items] == \
        [(it.width, it.height, it.entry) for it in first.items]
    monkeypatch.undo()
    Image.fromarray(marked(120, 40)).save(folder / "p1.jpg", quality=90)
    os.utime(folder / "p1.jpg", ns=(1, 1))  # a time of its own, whatever the clock's step
    edited = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    assert (edited.items[1].width, edited.items[1].height) == (120, 40)
    assert edited.items[1].entry != first.items[1].entry
    (root / cache.Index.NAME).write_text("{not json")
    again = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    assert [(it.width, it.height) for it in again.items] == [(96, 64), (120, 40), (80, 80)]


# ----------------------------------------------------------------------------- with GL
def _zoomed_in_run(device, tmp_path, src, frames=40, **kw):
    """`src` as one image in 256-texel chunks, shown at twice full size for `frames` frames
    at 320x180 under 64 MiB, each frame waiting for its detail unless told otherwise: (the
    view, the run)."""
    from PIL import Image

    Image.fromarray(src).save(tmp_path / "big.png")
    kw.setdefault("wait_detail", True)
    view = ImageView(tmp_path / "big.png", chunk=256, thumb_edge=128, workers=1,
                     progress=False, **kw)
    size = (320, 180)
    view.navigator.resize(*size)
    view.full_size(0)
    view.navigator.zoom(1, factor=2.0)
    return view, run_scene(view, device=device, frames=frames, size=size,
                           provider="streaming", budget="64MiB", deterministic=True,
                           on_frame=view.hooks())


@pytest.mark.slow
def test_wall_of_mixed_files_upright_in_budget_no_leaks(device, mixed, isolated_cache):
    folder, sizes = mixed
    wall = ImageWall([folder], workers=1, wait_detail=True, progress=False)
    assert [Path(p).name for p, _ in wall.problems] == ["broken.jpg"]
    assert len(wall.items) == len(sizes)
    result = run_scene(wall, device=device, frames=6, size=SIZE, provider="streaming",
                       budget="64MiB", on_frame=wall.hooks())
    assert result.summary["leaked_objects"] == 0
    assert all(f["total_bytes"] <= f["budget_bytes"] for f in result.frames)
    assert result.frames[-1]["view_pending_chunks"] == 0
    for it in wall.items:
        assert it.rect.width / it.rect.height == pytest.approx(it.width / it.height)
        assert not corners_match(result.image, wall.navigator, it.rect), it.source.name
    # The second run starts from the cache: nothing left to encode.
    again = ImageWall([folder], workers=1, progress=False)
    provider = _static(device)
    scene = again.build(device, provider, {})
    try:
        assert scene.encoder is None
    finally:
        scene.release()
        provider.release()


def _static(device):
    from engine.streaming.static import StaticTextureProvider

    return StaticTextureProvider(device)


@pytest.mark.slow
def test_chunked_image_shows_its_detail_when_zoomed(device, tmp_path, isolated_cache):
    """An image cut into a grid of chunk textures (the path of images beyond the driver's
    maximum, here at a small chunk size): zoomed to two screen pixels per image pixel it
    shows the one-pixel checkerboard, which its thumbnail (a flat grey there) cannot hold."""
    src = marked(1200, 700, fine=True)
    view, result = _zoomed_in_run(device, tmp_path, src)
    assert result.summary["leaked_objects"] == 0
    assert len(view.items[0].chunks) == 15
    core = result.image[40:-40, 60:-60, 0].astype(float)
    # Bilinear at 2x of a 40/128 checker gives two levels about 18 apart; a thumbnail, flat.
    assert core.std() > 6, core.std()
    view.fit_all()
    whole = run_scene(view, device=device, frames=2, size=(320, 180), provider="streaming",
                      budget="64MiB", on_frame=view.hooks())
    assert not corners_match(whole.image, view.navigator, view.items[0].rect)
    pick = view.pick((0.0, 0.0))
    assert pick is not None and pick.index == 0 and abs(pick.x - 600) <= 2


def test_not_yet_encoded_chunks_show_the_thumbnail(device, tmp_path, isolated_cache):
    """Before any chunk is encoded, each chunk's quad shows its part of the thumbnail: the
    whole picture is there, upright, at once; a grid layout in the given order keeps it."""
    from PIL import Image

    Image.fromarray(marked(900, 500)).save(tmp_path / "m.png")
    Image.fromarray(marked(300, 400)).save(tmp_path / "a.png")
    wall = ImageWall([tmp_path / "m.png", tmp_path / "a.png"], chunk=256, detail=False,
                     layout="grid", order="given", workers=1, progress=False)
    wall.make_thumbnails()  # no placeholders: the thumbnails are what is tested
    assert [it.source.name for it in wall.items] == ["m.png", "a.png"]
    result = run_scene(wall, device=device, frames=2, size=SIZE, provider="streaming",
                       budget="64MiB", on_frame=wall.hooks())
    assert result.summary["leaked_objects"] == 0
    assert len(wall.items[0].chunks) == 8 and result.frames[-1]["view_pending_chunks"] == 8 + 4
    for it in wall.items:
        assert not corners_match(result.image, wall.navigator, it.rect), it.source.name


@pytest.mark.slow
def test_image_beyond_the_max_texture_size(device, tmp_path, isolated_cache):
    """An image wider than GL_MAX_TEXTURE_SIZE (cheap: a thin strip) is shown whole,
    upright, as chunk textures of at most min(4096, max) texels."""
    from PIL import Image

    limit = device.caps.max_texture_size
    w, h = limit + 200, 1024
    a = np.full((h, w, 3), 128, np.uint8)
    a[:, :w // 4] = (255, 0, 0)
    a[:, -w // 4:] = (0, 0, 255)
    Image.fromarray(a).save(tmp_path / "wide.png", compress_level=1)
    view = ImageView(tmp_path / "wide.png", workers=1, wait_detail=True, progress=False)
    result = run_scene(view, device=device, frames=2, size=SIZE, provider="streaming",
                       budget="64MiB", on_frame=view.hooks())
    assert result.summary["leaked_objects"] == 0
    assert len(view.items[0].chunks) == -(-w // min(4096, limit))
    nav, r = view.navigator, view.items[0].rect
    from view_helpers import screen_of

    for fx, colour in ((0.1, (255, 0, 0)), (0.5, (128, 128, 128)), (0.9, (0, 0, 255))):
        x, y = screen_of(nav, r, SIZE, fx, 0.5)
        assert np.abs(result.image[y, x, :3].astype(int) - colour).max() < 30, fx


# ----------------------------------------------------------------------------- the command
def _view(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "view", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def view_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["ENGINE_CACHE"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.slow
def test_view_command_headless_reports_the_broken_file_once(mixed, view_env, tmp_path):
    folder, sizes = mixed
    shot, report, trace = tmp_path / "s.png", tmp_path / "r.json", tmp_path / "t.json"
    proc = _view([str(folder), "--frames", "3", "--size", "320x180", "--workers", "1",
                  "--screenshot", str(shot), "--report", str(report), "--budget", "64MiB",
                  "--trace", str(trace)],
                 view_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("broken.jpg") == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["images"] == len(sizes) and summary["over_budget_frames"] == 0
    assert summary["leaked_objects"] == 0
    assert shot.is_file() and json.loads(report.read_text())["summary"]["frames"] == 3
    # the report lists what was shown and what was skipped, and the two start times
    doc_summary = json.loads(report.read_text())["summary"]
    assert sorted(Path(p).relative_to(folder).as_posix() for p in doc_summary["image_files"]) \
        == sorted(sizes)
    assert [Path(s["path"]).name for s in doc_summary["skipped"]] == ["broken.jpg"]
    assert "first_frame_s" in doc_summary and "detail_complete_s" in doc_summary
    from engine.diagnostics.trace import final_counters, validate_trace
    doc = json.loads(trace.read_text())
    assert validate_trace(doc)["X"] >= 3  # a slice per frame at least
    last = json.loads(report.read_text())["frames"][-1]
    assert final_counters(doc)["budget"]["budget"] == last["budget_bytes"]


@pytest.mark.window
@pytest.mark.slow
def test_view_command_in_a_window(mixed, view_env, xvfb_display, tmp_path):
    from PIL import Image

    folder, _ = mixed
    shot = tmp_path / "w.png"
    proc = _view([str(folder), "--frames", "3", "--size", "320x180", "--workers", "1",
                  "--screenshot", str(shot), "--wait-detail"],
                 {**view_env, "DISPLAY": xvfb_display})
    assert proc.returncode == 0, proc.stderr
    assert "no window" not in proc.stderr and "running headless" not in proc.stderr
    assert json.loads(proc.stdout)["leaked_objects"] == 0
    image = np.asarray(Image.open(shot))
    assert image.std() > 20  # the wall, not a cleared screen


def _example(name: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_jupyter_example_runs_offscreen(mixed, view_env, tmp_path):
    pytest.importorskip("rendercanvas")
    folder, _ = mixed
    out = tmp_path / "j.png"
    proc = _example("view_jupyter.py", [str(folder), "--out", str(out)], view_env)
    assert proc.returncode == 0, proc.stderr
    assert "Pick(index=" in proc.stdout and out.stat().st_size > 0


@pytest.mark.window
@pytest.mark.slow
@pytest.mark.parametrize("name", ["view_glfw.py", "view_qt.py"])
def test_window_examples_run(name, mixed, view_env, xvfb_display):
    if name == "view_qt.py":
        pytest.importorskip("PySide6")
    folder, _ = mixed
    proc = _example(name, [str(folder), "--frames", "3"], {**view_env, "DISPLAY": xvfb_display})
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------- engine bake
def test_bake_takes_folders_and_a_failed_bake_leaves_no_folder(mixed, tmp_path, capsys):
    from engine.cli import main as cli_main

    folder, _ = mixed
    sub = folder / "sub"
    out = tmp_path / "baked" / "deep"
    assert cli_main(["bake", str(sub), "-o", str(out), "--format", "bc1", "--jobs", "1",
                      "--no-progress"]) == 0
    assert [p.name for p in out.iterdir()] == ["j_sub.jpg".replace(".jpg", ".ktx2")]
    broken = tmp_path / "only_broken"
    broken.mkdir()
    (broken / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n nope")
    failed = tmp_path / "never" / "made"
    assert cli_main(["bake", str(broken), "-o", str(failed), "--jobs", "1", "--no-progress"]) == 1
    assert not (tmp_path / "never").exists()
    twins = tmp_path / "twins"
    (twins / "a").mkdir(parents=True)
    (twins / "b").mkdir()
    for d in ("a", "b"):
        (twins / d / "same.png").write_bytes((folder / "b.png").read_bytes())
    assert cli_main(["bake", str(twins), "-o", str(tmp_path / "t"), "--no-progress"]) == 1
    assert "same.ktx2" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_bake_reads_named_files_past_pillows_bomb_guard(tmp_path, monkeypatch):
    """Pillow's guard (shrunk here to 1000 pixels) does not stop a file the user named; the
    engine's own limit does, with a message."""
    from PIL import Image

    from engine.errors import TextureFormatError
    from engine.textures import source_image

    Image.fromarray(marked(60, 40)).save(tmp_path / "x.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    assert source_image.read_image(tmp_path / "x.png").pixels.shape == (40, 60, 4)
    monkeypatch.setattr(source_image, "NAMED_FILE_MAX_PIXELS", 2000)
    with pytest.raises(TextureFormatError, match="over the limit of 2000; raise it with --max-pixels"):
        source_image.read_image(tmp_path / "x.png")


@pytest.mark.slow
def test_view_of_nothing_readable_is_a_user_error(view_env, tmp_path):
    """Paths that hold no image are the user's to fix: one line, exit 2, no traceback."""
    proc = _view([str(tmp_path / "missing.jpg"), "--frames", "1"], view_env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: " in proc.stderr and "no image could be read" in proc.stderr


def test_gpu_encoder_makes_the_same_chunks_as_the_workers(device, tmp_path, isolated_cache):
    """`encoder="gpu"`: the chunks are encoded by the compute encoder on the render thread
    (the worker only decodes and writes), shown zoomed as with the CPU encoder, no leaks;
    the files hold the blocks the GPU encoder makes of the chunk's pixels and GPU mips."""
    from engine.gl.bc_encode import GpuBlockEncoder
    from engine.textures.ktx2 import open_ktx2

    if device.caps.version_code < 430:
        pytest.skip("compute shaders need GL 4.3")
    src = marked(512, 256, fine=True)  # two chunks of one size: llvmpipe compiles once
    view, result = _zoomed_in_run(device, tmp_path, src, encoder="gpu")
    assert result.summary["leaked_objects"] == 0 and result.summary["over_budget_frames"] == 0
    assert result.frames[-1]["view_pending_chunks"] == 0
    core = result.image[40:-40, 60:-60, 0].astype(float)
    assert core.std() > 6, core.std()
    it = view.items[0]
    assert len(it.chunks) == 2
    chunk = it.chunks[0]
    x0, y0, x1, y1 = chunk.box
    written = open_ktx2(cache.chunk_path(it.entry, "bc1", 256, 0))
    enc = GpuBlockEncoder(device)
    try:
        pixels = decode_upright(str(tmp_path / "big.png"))[y0:y1, x0:x1]
        job = enc.start_mipmapped(np.ascontiguousarray(pixels), written.pixel_format.name)
        try:
            job.run()
            assert job.result() == [written.read_level(i) for i in range(len(written.levels))]
        finally:
            job.release()
    finally:
        enc.release()


def test_gpu_encoder_leaves_a_chunk_that_does_not_fit_to_the_workers(
        device, tmp_path, isolated_cache, monkeypatch):
    """A chunk whose GPU encode (source chain and blocks) would not fit in the budget's room
    left is encoded by the worker pool instead: the same files as the CPU encoder's, no
    frame over the budget, no leaks."""
    from engine.view import encoder

    if device.caps.version_code < 430:
        pytest.skip("compute shaders need GL 4.3")
    monkeypatch.setattr(encoder, "gpu_job_bytes", lambda w, h: 1 << 40)
    monkeypatch.setattr(encoder.DetailEncoder, "gpu_headroom", 0)  # known from frame 0
    src = marked(512, 256, fine=True)
    view, result = _zoomed_in_run(device, tmp_path, src, encoder="gpu")
    assert result.summary["leaked_objects"] == 0 and result.summary["over_budget_frames"] == 0
    assert result.frames[-1]["view_pending_chunks"] == 0
    it = view.items[0]
    whole = decode_upright(str(tmp_path / "big.png"))
    for c in it.chunks:  # what the workers' encode of the chunk's pixels writes
        x0, y0, x1, y1 = c.box
        cache.encode_chain(np.ascontiguousarray(whole[y0:y1, x0:x1]), "bc1",
                           tmp_path / f"cpu{c.k}.ktx2")
        assert cache.chunk_path(it.entry, "bc1", 256, c.k).read_bytes() == \
            (tmp_path / f"cpu{c.k}.ktx2").read_bytes()


def test_tiled_tiff_chunks_read_their_own_tiles(device, tmp_path, isolated_cache, monkeypatch):
    """A tiled TIFF of several chunks is not decoded whole before its first chunk: each
    chunk job reads the tiles under it; zoomed in, it shows its fine detail, no leaks."""
    tifffile = pytest.importorskip("tifffile")
    from engine.view import encoder

    def no_staging(*args, **kw):
        raise AssertionError("a tiled TIFF was staged")

    monkeypatch.setattr(encoder.cache, "stage_upright", no_staging)
    src = marked(1200, 700, fine=True)
    tifffile.imwrite(tmp_path / "big.tif", src, tile=(128, 128), compression="zlib")
    view = ImageView(tmp_path / "big.tif", chunk=256, thumb_edge=128, workers=1,
                     wait_detail=True, progress=False)
    size = (320, 180)
    view.navigator.resize(*size)
    view.full_size(0)
    view.navigator.zoom(1, factor=2.0)
    result = run_scene(view, device=device, frames=40, size=size, provider="streaming",
                       budget="64MiB", deterministic=True, on_frame=view.hooks())
    assert result.summary["leaked_objects"] == 0 and result.summary["over_budget_frames"] == 0
    assert len(view.items[0].chunks) == 15 and not view.problems
    assert result.image[40:-40, 60:-60, 0].astype(float).std() > 6
