"""Every input and output checked before work (issue 35): thin images are shown, special
files are skipped and named (never opened), output paths that are not regular files or lack
a known extension are refused up front, a full disk while writing a trace or a report is
one clear error that leaves nothing behind, and an absurd --count is refused at once."""
from __future__ import annotations

import argparse
import errno
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from engine import inputs
from engine.hosts.run import run_scene
from engine.cli import main
from engine.cli_args import image_output_file, json_output_file, output_file, scene_count_arg
from engine.diagnostics.files import atomic_text
from engine.diagnostics.trace import Tracer
from engine.errors import OutputWriteError, UsageError
from engine.formats import get
from engine.streaming.provider import decide_virtual
from engine.view import cache
from engine.view.discover import discover
from engine.view.wall import ImageWall
from view_helpers import marked

THIN = [(2048, 1), (1, 1500), (1200, 3), (3, 3), (1100, 2)]


@pytest.mark.parametrize("w,h,virtual", [(2048, 1, False), (1, 5000, False), (3000, 3, False),
                                         (4096, 4, True)])
def test_a_texture_thinner_than_a_block_never_streams_as_tiles(w, h, virtual):
    assert decide_virtual("always", w, h, get("BC7_SRGB"), is_2d=True, vt_format=None) \
        is virtual


def _thin_folder(folder: Path) -> Path:
    from PIL import Image

    folder.mkdir()
    for w, h in THIN:
        Image.fromarray(np.full((h, w, 3), 200, np.uint8)).save(folder / f"t{w}x{h}.png")
    return folder


@pytest.mark.slow
def test_thin_images_are_shown_and_shown_again_from_the_cache(device, tmp_path):
    """1xN, Nx1, Nx3 and 3x3 images: drawn, their full detail made, then drawn again with
    every chunk from the cache (a cached chunk of 2048x1 used to fail every rerun)."""
    folder = _thin_folder(tmp_path / "thin")
    pending = []
    for _ in range(2):
        wall = ImageWall([folder], workers=1, progress=False, cache_dir=tmp_path / "cache")
        assert wall.problems == [] and len(wall.items) == len(THIN)
        result = run_scene(wall, device=device, frames=1, size=(320, 180),
                           provider="streaming", budget="64MiB", on_frame=wall.hooks())
        assert result.summary["leaked_objects"] == 0
        pending.append(result.frames[-1]["view_pending_chunks"])
        for it in wall.items:  # what the workers would make: each image is one chunk
            (c,) = it.chunks
            cache.encode_chunk(str(it.source), str(it.entry), wall.format, 4096, 0, c.box,
                               False)
    assert pending[1] == 0 < pending[0]


def test_special_files_are_skipped_and_named_never_opened(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"")
    os.mkfifo(folder / "pipe.png")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock.jpg"))
    try:
        found = discover([str(folder), str(folder / "pipe.png"), str(folder / "*.jpg"),
                          "/dev/null"])
    finally:
        sock.close()
    assert found.files == [folder / "a.png"]
    said = dict(found.problems)
    assert said[str(folder / "pipe.png")] == "a FIFO, not a regular file: skipped"
    assert said[str(folder / "sock.jpg")].startswith("a socket")
    assert said["/dev/null"].startswith("a device")
    assert said[str(folder / "*.jpg")] == "the pattern matches no image"
    assert len(found.problems) == 4  # the FIFO and the socket, found twice, said once


def test_a_wall_given_a_fifo_names_it_and_does_not_wait(tmp_path):
    from PIL import Image

    Image.fromarray(marked(64, 48)).save(tmp_path / "a.png")
    os.mkfifo(tmp_path / "pipe.png")
    os.mkfifo(tmp_path / "pipe.ktx2")
    wall = ImageWall([tmp_path / "pipe.png", tmp_path / "pipe.ktx2", tmp_path / "a.png"],
                     workers=1, detail=False, progress=False, cache_dir=tmp_path / "cache")
    assert len(wall.items) == 1
    assert sorted(Path(p).name for p, _ in wall.problems) == ["pipe.ktx2", "pipe.png"]


@pytest.mark.parametrize("check,text,why", [
    (output_file, "/dev/null", "not a regular file"),
    (json_output_file, "/dev/null", "not a regular file"),
    (image_output_file, "/dev/full", "not a regular file"),
    (json_output_file, "{tmp}/report", "no file extension"),
    (json_output_file, "{tmp}/report.txt", "unknown file extension"),
    (image_output_file, "{tmp}/shot", "no file extension"),
    (image_output_file, "{tmp}/shot.json", "unknown file extension"),
    (image_output_file, "{tmp}", "is a folder"),
])
def test_bad_output_paths_are_refused_before_the_run(tmp_path, check, text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        check(text.format(tmp=tmp_path))


def test_good_output_paths_are_accepted(tmp_path):
    assert json_output_file(str(tmp_path / "out" / "r.json")).name == "r.json"
    for name in ("s.png", "s.JPG", "s.bmp", "s.tif", "s.webp"):
        assert image_output_file(str(tmp_path / name)).name == name


def test_the_cli_refuses_an_output_without_extension_at_once(tmp_path, capsys):
    assert main(["view", str(tmp_path), "--headless", "--screenshot",
                 str(tmp_path / "shot")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no file extension" in err[0]


def test_an_absurd_count_is_refused_at_once():
    with pytest.raises(UsageError, match="1 to 100,000"):
        inputs.scene_count(10 ** 8)
    with pytest.raises(argparse.ArgumentTypeError):
        scene_count_arg("100000000")
    assert scene_count_arg("200") == 200


class _FullDisk:
    """A file on a full disk: every write fails with ENOSPC."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        pass


def test_a_full_disk_while_tracing_is_one_error_and_leaves_nothing(tmp_path):
    path = tmp_path / "run.json"
    tracer = Tracer(path)
    tracer._file.close()
    tracer._file = _FullDisk()  # type: ignore[assignment]
    with pytest.raises(OutputWriteError, match="run.json: No space left on device"):
        tracer.close()
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_while_writing_a_report_is_one_error_and_leaves_nothing(tmp_path):
    def full(tmp: Path) -> None:
        tmp.write_text("{")
        raise OSError(errno.ENOSPC, "No space left on device")

    from engine.diagnostics import files

    with pytest.raises(OutputWriteError, match="No space left on device"):
        files.atomic_write(tmp_path / "report.json", full)
    assert list(tmp_path.iterdir()) == []
    assert atomic_text(tmp_path / "ok.json", "{}").read_text() == "{}"
