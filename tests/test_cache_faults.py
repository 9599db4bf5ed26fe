"""A cache that heals (issue 35): a damaged cached file is a miss that is made again, never
an error; writes are whole or absent; temporary files of killed writers are swept; a cache
that cannot be written degrades to a temporary one. The battery at the end damages random
cache files (cut short, zero-filled, bytes flipped) and reruns the viewer each time."""
from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.hosts.run import run_scene
from engine.textures import durable
from engine.textures import ktx2_write
from engine.view import atlas, cache
from engine.view.wall import ImageWall
from view_helpers import marked

TEMP_NAMES = ("*.tmp[0-9]*", ".*.tmp")


def _chain(path: Path, w: int = 64, h: int = 48) -> Path:
    rgba = np.dstack([marked(w, h), np.full((h, w), 255, np.uint8)])
    cache.encode_chain(rgba, "bc1", path)
    return path


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)


def _temps(root: Path) -> list[Path]:
    return [p for pattern in TEMP_NAMES for p in root.rglob(pattern)]


@pytest.mark.parametrize("damage", ["truncate", "zero", "header"])
def test_a_damaged_cached_texture_is_a_miss_named_once(tmp_path, caplog, damage):
    path = _chain(tmp_path / "thumb256.ktx2")
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "zero":
        path.write_bytes(bytes(len(data)))
    else:
        path.write_bytes(data[:12] + b"\xff" * 40 + data[52:])
    caplog.set_level(logging.WARNING, "engine.view.cache")
    assert cache.usable(path) is False
    assert not path.exists()
    assert len([r for r in caplog.records if "is damaged" in r.message]) == 1


class _Provider:
    """register_many as the streaming provider does it: all or nothing per batch."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def register_many(self, entries):
        from engine.textures.reader import open_texture

        for _, path in entries:
            open_texture(path)
        for key, _ in entries:
            self.ids.setdefault(key, len(self.ids))
        return [self.ids[key] for key, _ in entries]


def test_one_damaged_chunk_does_not_fail_the_batch(tmp_path):
    paths = [_chain(tmp_path / f"c{k}.ktx2") for k in range(3)]
    paths[1].write_bytes(paths[1].read_bytes()[:100])
    ids = cache.register_cached(_Provider(), [(p.name, p) for p in paths])
    assert ids[0] is not None and ids[1] is None and ids[2] is not None
    assert not paths[1].exists()


def test_a_damaged_atlas_page_makes_the_atlas_a_miss(tmp_path):
    thumbs = [_chain(tmp_path / f"t{i}.ktx2", 32, 32) for i in range(4)]
    folder = tmp_path / "atlas"
    made = atlas.build(folder, thumbs, 32, 64)
    assert made is not None and atlas.load(folder, 4) is not None
    page = made.pages[0]
    page.write_bytes(bytes(page.stat().st_size))
    assert atlas.load(folder, 4) is None and not page.exists()
    assert atlas.build(folder, thumbs, 32, 64) is not None and atlas.load(folder, 4)


def test_writes_are_whole_or_absent(tmp_path, monkeypatch):
    def broken(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        durable.write_atomic(tmp_path / "meta.json", broken)
    assert list(tmp_path.iterdir()) == []

    def full(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ktx2_write, "commit", full)
    with pytest.raises(OSError):
        _chain(tmp_path / "c0.ktx2")
    assert list(tmp_path.iterdir()) == []  # write_ktx2 removed its temporary file


def test_temporary_files_of_killed_writers_are_swept(tmp_path):
    dead = _dead_pid()
    names = [f"c0.ktx2.tmp{dead}", f".meta.json.{dead}.tmp", f".page0.ktx2.{dead}.tmp",
             f"c1.ktx2.tmp{os.getpid()}", "notes.txt", f"c2.ktx2.tmp{dead}.keep"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    os.mkfifo(tmp_path / f"c3.ktx2.tmp{dead}")  # not a regular file: not ours, left alone
    assert durable.sweep_temps(tmp_path) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"c1.ktx2.tmp{os.getpid()}", "notes.txt", f"c2.ktx2.tmp{dead}.keep",
         f"c3.ktx2.tmp{dead}"])


def test_an_unwritable_cache_runs_with_a_temporary_one(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a cache under a file can never be made, whoever runs the test
    caplog.set_level(logging.WARNING, "engine.view.cache")
    root = cache.writable_root(blocker / "cache")
    assert root.is_dir() and root != blocker / "cache"
    said = [r.message for r in caplog.records]
    assert len(said) == 1 and "$ENGINE_CACHE" in said[0] and "without a cache" in said[0]


# --------------------------------------------------------------------------- battery
def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    err = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if err == 0 else 10 * np.log10(255.0 ** 2 / err)


def _damage(path: Path, kind: str, rng: random.Random) -> None:
    """What a crash, a power loss, a full disk or a bad copy makes of a file: cut short
    anywhere, zero-filled, bits flipped anywhere, or 64 KiB overwritten mid-file (the level
    data: caught by the checksum per level)."""
    data = bytearray(path.read_bytes())
    if kind == "truncate":
        data = data[:rng.randrange(0, len(data))]
    elif kind == "zero":
        data = bytearray(len(data))
    elif kind == "flip":
        for _ in range(16):
            data[rng.randrange(0, len(data))] ^= 1 << rng.randrange(8)
    else:
        mid = len(data) // 2
        data[mid:mid + 65536] = rng.randbytes(len(data[mid:mid + 65536]))
    path.write_bytes(bytes(data))


@pytest.mark.slow
def test_random_damage_to_the_cache_never_fails_a_rerun(device, tmp_path, caplog):
    """16 small images (an atlas) and one of six chunks: after each random damage of a
    cached file (8: each kind twice), the rerun succeeds, its picture is >= 40 dB against
    the fresh cache's and no temporary file is left."""
    from PIL import Image

    folder, root = tmp_path / "photos", tmp_path / "cache"
    folder.mkdir()
    for i in range(16):
        Image.fromarray(marked(64 + 4 * i, 48)).save(folder / f"p{i:02}.png")
    Image.fromarray(marked(600, 300, fine=True)).save(folder / "big.png")

    def run() -> np.ndarray:
        wall = ImageWall([folder], workers=1, wait_detail=True, progress=False,
                         cache_dir=root / "view" / f"v{cache.VERSION}")  # $ENGINE_CACHE=root
        result = run_scene(wall, device=device, frames=3, size=(320, 180),
                           provider="streaming", budget="64MiB", deterministic=True,
                           on_frame=wall.hooks())
        assert result.summary["leaked_objects"] == 0
        return result.image

    fresh = run()
    rng = random.Random(35)
    worst = float("inf")
    for round_ in range(8):
        files = sorted(p for p in root.rglob("*.ktx2")  # what is drawn: chunks, pages
                       if p.is_file() and p.name.startswith(("c", "page")))
        target = rng.choice(files)
        kind = ("truncate", "zero", "flip", "overwrite")[round_ % 4]
        _damage(target, kind, rng)
        image = run()
        worst = min(worst, _psnr(image, fresh))
        assert worst >= 40.0, (round_, kind, target.name)
        assert _temps(root) == [], (round_, kind)
    assert sum("is damaged" in r.message for r in caplog.records) == 8
    print(f"fault battery: 8 damages, min PSNR {worst:.1f} dB")


def _killed_view(folder: Path, root: Path, after_s: float) -> None:
    """An `engine view` of `folder` on an empty cache `root`, SIGKILLed with its workers
    (its own session) `after_s` seconds in: while it writes thumbnails, pages and chunks.
    Returns once its workers are gone too (they end after their owner)."""
    import signal
    import time

    env = dict(os.environ, ENGINE_CACHE=str(root))
    proc = subprocess.Popen([sys.executable, "-m", "engine", "view", str(folder), "--headless",
                             "--frames", "400", "--size", "320x180", "--wait-detail"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if not _running_in_group(proc.pid):
            return
        time.sleep(0.05)
    raise AssertionError("the killed view's workers outlived it by 10 s")


def _running_in_group(pgid: int) -> list[int]:
    """Processes of process group `pgid` that have not ended (zombies aside: a killed
    worker whose parent died first stays one where the container's first process reaps no
    orphans), read from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_bytes() if d.name.isdigit() else b""
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            out.append(int(d.name))
    return out


@pytest.mark.slow
def test_random_kills_during_cache_writes_never_fail_a_rerun(device, tmp_path):
    """Two `engine view` runs SIGKILLed at random moments of a cold start (seeded): each
    rerun on the cache they left (the command's own settings and folder) succeeds, draws
    >= 40 dB against a fresh cache's picture and leaves no temporary file behind."""
    from PIL import Image

    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(16):
        Image.fromarray(marked(64 + 4 * i, 48)).save(folder / f"p{i:02}.png")
    Image.fromarray(marked(600, 300, fine=True)).save(folder / "big.png")

    def run(root: Path) -> np.ndarray:
        wall = ImageWall([folder], workers=1, wait_detail=True, progress=False,
                         cache_dir=root / "view" / f"v{cache.VERSION}")  # $ENGINE_CACHE=root
        wall.make_thumbnails()
        result = run_scene(wall, device=device, frames=3, size=(320, 180),
                           provider="streaming", budget="64MiB", deterministic=True,
                           on_frame=wall.hooks())
        assert result.summary["leaked_objects"] == 0
        return result.image

    fresh = run(tmp_path / "fresh")
    rng = random.Random(36)
    for k in range(2):
        root = tmp_path / f"killed{k}"
        _killed_view(folder, root, rng.uniform(0.5, 1.2))
        db = _psnr(run(root), fresh)
        assert db >= 40.0, (k, db)
        assert _temps(root) == [], k


def test_a_source_replaced_with_the_same_size_and_time_misses(tmp_path):
    from PIL import Image

    folder, root = tmp_path / "photos", tmp_path / "cache"
    folder.mkdir()
    path = folder / "p.bmp"  # uncompressed: the same size whatever the picture
    Image.fromarray(marked(64, 48)).save(path)
    first = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    st = path.stat()
    other = tmp_path / "other.bmp"
    Image.fromarray(marked(64, 48)[::-1].copy()).save(other)
    os.replace(other, path)  # as `cp -p` or `touch -r` leave it: same size and times
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    again = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    assert again.items[0].entry != first.items[0].entry


@pytest.mark.slow  # a process pool
def test_staged_pixels_of_an_unfinished_image_are_not_left_on_disk(tmp_path):
    """An image of six chunks, staged by one decode; the encoder closes (the run ends) with
    chunks still to make: no uncompressed staging file stays behind."""
    import time

    from PIL import Image

    from engine.view.encoder import DetailEncoder, Job
    from engine.view.layout import chunk_grid

    src = tmp_path / "big.png"
    Image.fromarray(marked(600, 300)).save(src)
    entry = tmp_path / "cache" / "ab" / "abcd"
    entry.mkdir(parents=True)
    jobs = [Job(0, k, str(src), str(entry), box, True)
            for k, box in enumerate(chunk_grid(600, 300, 256))]
    enc = DetailEncoder(jobs, "bc1", 256, 1, 1 << 30)
    staging = cache.staging_dir(entry, "bc1", 256)
    try:
        deadline = time.monotonic() + 30
        while not enc._staged.get(0) and time.monotonic() < deadline:
            enc.pump([(0, 0)])
            time.sleep(0.01)
        assert staging.is_dir() and any(staging.iterdir())
    finally:
        enc.close()
    assert not staging.exists()


def test_bytes_overwritten_inside_a_level_are_a_miss(tmp_path, caplog):
    """64 KiB of noise in the middle of a level parses perfectly; its checksum does not."""
    path = _chain(tmp_path / "c0.ktx2", 512, 512)
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 65536] = random.Random(35).randbytes(65536)
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, "engine.view.cache")
    assert cache.usable(path) is False and not path.exists()
    said = [r.message for r in caplog.records if "is damaged" in r.message]
    assert len(said) == 1 and "checksum of level 0" in said[0]


def test_a_cached_texture_without_checksums_is_a_miss(tmp_path):
    """A file from before checksums (or anyone's KTX2) is never trusted as a cache entry."""
    path = tmp_path / "c0.ktx2"
    ktx2_write.write_ktx2(path, "BC1_RGB_SRGB", 8, 4, [bytes(16)])
    assert cache.usable(path) is False and not path.exists()


def _enospc() -> OSError:
    import errno

    return OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_mid_run_makes_the_thumbnails_in_a_temporary_cache(
        tmp_path, caplog, monkeypatch):
    """The cache folder fills after its start-up check: the thumbnails it refuses are made
    in the run's temporary cache, with one warning naming $ENGINE_CACHE; every image shows."""
    from PIL import Image

    folder, root = tmp_path / "photos", tmp_path / "cache"
    folder.mkdir()
    for i in range(3):
        Image.fromarray(marked(64 + 8 * i, 48)).save(folder / f"p{i}.png")
    make = cache.make_thumbnail

    def full(source, entry, *args):
        if Path(entry).parents[1] == root:
            raise _enospc()
        return make(source, entry, *args)

    monkeypatch.setattr(cache, "make_thumbnail", full)
    caplog.set_level(logging.WARNING)
    wall = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=root)
    wall.make_thumbnails()
    assert len(wall.items) == 3 and not wall.problems
    assert all(it.entry.parents[1] == cache.spare_root() for it in wall.items)
    assert all(cache.usable(cache.thumb_path(it.entry, wall.thumb_edge)) for it in wall.items)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1 and "$ENGINE_CACHE" in said[0]
    assert "continues without caching" in said[0] and _temps(root) == []


@pytest.mark.slow  # a process pool
def test_a_full_disk_mid_run_makes_full_detail_in_a_temporary_cache(tmp_path, caplog):
    """A chunk write refused by a full cache folder: the chunks still to make go to the
    run's temporary cache (one warning) and are made there."""
    from concurrent.futures import Future

    from PIL import Image

    from engine.view.encoder import DetailEncoder, Job

    src = tmp_path / "p.png"
    Image.fromarray(marked(200, 100)).save(src)
    entry = tmp_path / "cache" / "ab" / "abcd"
    entry.mkdir(parents=True)
    jobs = [Job(0, 0, str(src), str(entry), (0, 0, 200, 100), False)]
    enc = DetailEncoder(jobs, "bc1", 256, 1, 1 << 30)
    caplog.set_level(logging.WARNING)
    try:
        failed: Future = Future()
        failed.set_exception(_enospc())
        enc._running[failed] = ("chunk", (0, 0))
        assert enc._collect([failed]) == [] and enc.pending == 1
        done = enc.wait_for([(0, 0)], [(0, 0)])
    finally:
        enc.close()
    moved = cache.spare_root() / "ab" / "abcd"
    assert done == [((0, 0), str(cache.chunk_path(moved, "bc1", 256, 0)))]
    assert cache.usable(Path(done[0][1])) and not enc.take_failures()
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1 and "$ENGINE_CACHE" in said[0]
