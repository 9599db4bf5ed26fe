"""What a wall's first frame costs, said structurally (no timings): a cold folder of JPEGs
is sized from a few KB of each file's markers with no Pillow open and no decode; a warm
folder whose atlas is missing draws before the atlas is made, which is made after frame 0
and found by the next run; `python -m engine view` imports no other command."""
from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.hosts.run import run_scene
from engine.view import cache
from engine.view.jpeg_header import read_jpeg_header
from engine.view.wall import ImageWall
from view_helpers import jpeg_with_thumbnail, marked

ROOT = Path(__file__).resolve().parents[1]


def _copies(folder: Path, count: int, data: bytes) -> None:
    """`count` distinct files of one JPEG (a comment segment after SOI makes each its own)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        note = f"copy {i}".encode()
        (folder / f"p{i:04d}.jpg").write_bytes(
            data[:2] + b"\xff\xfe" + (len(note) + 2).to_bytes(2, "big") + note + data[2:])


def test_the_marker_reader_agrees_with_pillow(tmp_path):
    """Sizes upright for every EXIF orientation, the thumbnail found, progressive and
    big-endian files read; anything else (a PNG, a file cut before its frame) is None."""
    for o in range(1, 9):
        jpeg_with_thumbnail(tmp_path / f"o{o}.jpg", marked(96, 64), marked(48, 32), o)
        head = read_jpeg_header(tmp_path / f"o{o}.jpg")
        assert head is not None and head.orientation == o
        with Image.open(tmp_path / f"o{o}.jpg") as im:
            w, h = im.size
            assert Image.open(io.BytesIO(head.thumbnail)).size == (48, 32)
        assert (head.width, head.height) == ((h, w) if o in (5, 6, 7, 8) else (w, h))
    big_endian = b"MM\x00\x2a" + struct.pack(">IH", 8, 1) + \
        struct.pack(">HHIHH", 0x0112, 3, 1, 8, 0) + struct.pack(">I", 0)
    Image.fromarray(marked(80, 40)).save(tmp_path / "mm.jpg", progressive=True,
                                         exif=b"Exif\x00\x00" + big_endian)
    with Image.open(tmp_path / "mm.jpg") as im:
        assert im.getexif()[0x0112] == 8  # as Pillow reads it
    head = read_jpeg_header(tmp_path / "mm.jpg")
    assert head is not None and (head.width, head.height, head.orientation) == (40, 80, 8)
    assert head.thumbnail is None and head.bytes_read < 1024  # the frame header, read early
    Image.fromarray(marked(80, 40)).save(tmp_path / "p.png")
    assert read_jpeg_header(tmp_path / "p.png") is None
    data = (tmp_path / "mm.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[:data.index(b"\xff\xc2")])
    assert read_jpeg_header(tmp_path / "cut.jpg") is None


def test_a_cold_folder_of_jpegs_is_sized_without_pillow(tmp_path, monkeypatch):
    """300 JPEGs: each a placeholder of the right size before any thumbnail exists, none
    opened by Pillow, at most a few KB read of each; one with an EXIF thumbnail opens only
    that thumbnail for its colour."""
    buf = io.BytesIO()
    Image.fromarray(marked(160, 120)).save(buf, "JPEG", quality=80)
    _copies(tmp_path / "f", 300, buf.getvalue())
    jpeg_with_thumbnail(tmp_path / "f" / "t.jpg", np.full((90, 120, 3), (200, 40, 40),
                                                          np.uint8),
                        np.full((30, 40, 3), (200, 40, 40), np.uint8))
    opened: list[str] = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda f, *a, **k: (
        opened.append(getattr(f, "name", "bytes")), real_open(f, *a, **k))[1])
    wall = ImageWall([tmp_path / "f"], workers=1, progress=False, cache_dir=tmp_path / "c")
    assert len(wall.items) == 301 and all(it.placeholder for it in wall.items)
    assert {(it.width, it.height) for it in wall.items} == {(160, 120), (120, 90)}
    assert opened == ["bytes"]  # the one EXIF thumbnail, from memory
    red = next(it for it in wall.items if it.source.name == "t.jpg").placeholder
    assert red is not None and red.embedded and abs(red.rgb[0] - 200) <= 3
    assert not list((tmp_path / "c").rglob("thumb*.ktx2"))  # nothing decoded yet
    head = read_jpeg_header(tmp_path / "f" / "p0000.jpg")
    assert head is not None and head.bytes_read <= 1024


def test_a_missing_atlas_is_made_after_the_first_frame(device, tmp_path):
    """Thumbnails cached, atlas gone: frame 0 draws placeholders, frame 1 the cached files;
    the atlas starts after frame 0 and the next run draws from it."""
    buf = io.BytesIO()
    Image.fromarray(marked(64, 48)).save(buf, "JPEG", quality=80)
    _copies(tmp_path / "f", 20, buf.getvalue())
    kwargs = {"workers": 1, "detail": False, "progress": False, "cache_dir": tmp_path / "c"}
    ImageWall([tmp_path / "f"], **kwargs).make_thumbnails()
    atlas_root = tmp_path / "c" / "atlas"
    assert atlas_root.is_dir()
    for page in atlas_root.rglob("*.ktx2"):
        page.unlink()
    wall = ImageWall([tmp_path / "f"], **kwargs)
    assert wall.atlas is None and not list(atlas_root.rglob("*.ktx2"))
    assert all(it.placeholder is not None and it.placeholder.cached for it in wall.items)
    later = wall._atlas_later
    started: list[bool] = []
    result = run_scene(wall, device=device, frames=3, size=(160, 90), provider="streaming",
                       budget="64MiB",
                       on_frame=[*wall.hooks(), lambda ctx: started.append(later.started)])
    assert started[0] is False and all(started[1:]), started  # after the first frame
    assert [f["view_placeholders"] for f in result.frames] == [20, 0, 0]  # then the files
    assert result.summary["leaked_objects"] == 0
    again = ImageWall([tmp_path / "f"], **kwargs)
    assert again.atlas is not None and all(again.atlas.slots)
    assert not any(it.placeholder for it in again.items)
    assert all(cache.thumb_path(it.entry, again.thumb_edge).is_file() for it in again.items)


def test_a_view_command_imports_no_other_command():
    code = ("import sys; from engine import cli; cli.build_parser(cli.ENGINE, 'view'); "
            "print(sorted(m for m in sys.modules if m.startswith('engine.commands.') "
            "or m == 'engine.demos'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['engine.commands.view', 'engine.commands.view_science']", out


def test_an_atlas_made_later_that_fails_is_left_to_a_later_run(tmp_path, monkeypatch, caplog):
    """A pool that cannot start (or a full disk) ends the background atlas with one warning,
    not a thread's traceback."""
    from engine.view import atlas_later

    def broken(*args, **kwargs):
        raise RuntimeError("the pool cannot start")

    monkeypatch.setattr(atlas_later.atlas_, "build", broken)
    job = atlas_later.AtlasLater(tmp_path / "a", [], 256, 4096, workers=1)
    job.wait()
    assert job.made is None
    assert any("atlas not made" in r.getMessage() for r in caplog.records)
