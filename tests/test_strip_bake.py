"""Baking by strips (engine.textures.strip_bake): the same file as the whole-image bake, memory
that does not grow with the image, and nothing left behind by a failed bake."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from engine.cli import main as cli_main
from engine.errors import TextureFormatError
from engine.textures import bake, strip_bake, strips
from engine.textures.progress import Progress

pytestmark = pytest.mark.skipif(not strips.available(), reason="needs pyvips (extra 'huge')")
ROOT = Path(__file__).resolve().parents[1]


def _image(w: int, h: int, alpha: bool, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 120, w)[None, :, None].astype(int)
    a = np.clip(rng.integers(0, 256, (h, w, 4)) // 2 + ramp, 0, 255).astype(np.uint8)
    a[..., 3] = 255
    if alpha:
        a[: h // 3, :, 3] = 0
        a[h // 3: h // 2, :, 3] = 100
    return a


def _write(path: Path, a: np.ndarray, alpha: bool) -> Path:
    import pyvips

    img = pyvips.Image.new_from_array(a if alpha else a[..., :3]).copy(interpretation="srgb")
    img.write_to_file(str(path))
    return path


@pytest.mark.parametrize("w,h,alpha,fmt,normal", [
    (37, 23, False, "bc7", False),     # odd sizes: three-tap box filters down the chain
    (64, 64, True, "bc1", False),      # punch-through BC1, alpha-weighted mips
    (90, 131, True, "bc7", False),
    (129, 65, False, "bc5", True),     # normal map, filtered as vectors
    (5, 3, True, "rgba8", False),
])
def test_strip_bake_writes_the_same_file_as_the_whole_image_bake(tmp_path, monkeypatch, w, h,
                                                                 alpha, fmt, normal):
    # Two or three rows a strip and small pieces: many strips, many pieces a level.
    monkeypatch.setattr(strip_bake, "STRIP_PIXELS", 2 * w + 1)
    monkeypatch.setattr(strip_bake, "PIECE_PIXELS", 8 * w)
    src = _write(tmp_path / "src.png", _image(w, h, alpha), alpha)
    whole = bake.bake_file(src, tmp_path / "whole", fmt, normal_map=normal)
    opts = bake._Options(fmt, True, None, normal)
    with ThreadPoolExecutor(2) as pool:
        by_strips = bake._bake_strips(str(src), tmp_path / "strips.ktx2", opts, pool, 2, False)
    assert (tmp_path / "strips.ktx2").read_bytes() == Path(whole.output).read_bytes()
    assert (by_strips.format, by_strips.levels, by_strips.bytes) == \
        (whole.format, whole.levels, whole.bytes)
    assert by_strips.psnr_db == pytest.approx(whole.psnr_db)


def test_the_cli_bakes_large_files_by_strips_and_refuses_past_max_pixels(tmp_path, monkeypatch,
                                                                          capsys, caplog):
    monkeypatch.setattr(bake, "STRIP_BAKE_PIXELS", 1000)
    src = _write(tmp_path / "big.png", _image(64, 48, False), False)
    assert cli_main(["bake", str(src), "-o", str(tmp_path / "a"), "--max-pixels", "3071",
                           "--jobs", "1", "--no-progress"]) == 1
    assert "raise it with --max-pixels" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    with caplog.at_level(logging.INFO, logger="engine.textures.bake"):
        assert cli_main(["bake", str(src), "-o", str(tmp_path / "a"), "--max-pixels", "3072",
                               "--jobs", "1", "--no-progress", "--format", "bc1"]) == 0
    assert "by strips" in caplog.text
    assert (tmp_path / "a" / "big.ktx2").is_file()


def test_a_failed_strip_bake_leaves_no_file_and_no_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bake, "STRIP_BAKE_PIXELS", 1000)
    good = _write(tmp_path / "cut.png", _image(256, 256, False), False)
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])  # the header reads; the rows run out halfway
    out = tmp_path / "new" / "sub"
    assert cli_main(["bake", str(good), "-o", str(out), "--jobs", "1", "--no-progress"]) == 1
    assert "cut.png" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()

    out.mkdir(parents=True)
    opts = bake._Options("bc7", True, None, False)
    with ThreadPoolExecutor(1) as pool, pytest.raises(TextureFormatError):
        bake._bake_strips(str(good), out / "cut.ktx2", opts, pool, 1, False)
    assert list(out.iterdir()) == []


def test_progress_logs_a_line_with_the_rate_and_time_left(caplog):
    with caplog.at_level(logging.INFO, logger="engine.progress"):
        with Progress(4, "rows stage", enabled=False, unit="row", log_interval=0.0) as bar:
            bar.advance(1)
            bar.advance(1)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "rows stage: started, 4 row(s)"
    assert lines[1].startswith("rows stage: 1/4 row(s) in ") and lines[1].endswith(" s left")
    assert len(lines) == 4  # start, two progress lines, end


_RSS_SCRIPT = """
import json, sys
from pathlib import Path
from engine.textures import bake
path, out, mode = sys.argv[1:]
if mode == "strips":
    bake.bake_many([path], out, "bc1", jobs=1, progress=False)
else:
    bake.bake_file(path, out, "bc1")
# VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec (a pytest
# worker's hundreds of MiB), VmHWM is this program's own.
hwm = [l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM")]
print(json.dumps(int(hwm[0].split()[1]) / 1024))
"""


@pytest.mark.slow
def test_strip_bake_memory_does_not_grow_with_the_image(tmp_path):
    """Peak RSS of a bake by strips of a 4096^2 and an 8192^2 image: four times the pixels,
    about the same memory (a whole-image bake holds about 20 bytes a pixel: 1.3 GiB at
    8192^2). Byte identity with the whole-image bake is the tests above."""
    import pyvips

    def source(n: int) -> Path:
        xy = pyvips.Image.xyz(n, n)
        img = (xy[0] * 255 / n).cast("uchar").bandjoin([(xy[1] * 255 / n).cast("uchar"),
                                                        ((xy[0] + xy[1]) % 256).cast("uchar")])
        src = tmp_path / f"huge{n}.tif"
        img.copy(interpretation="srgb").write_to_file(str(src), tile=True, tile_width=256,
                                                      tile_height=256)
        return src

    def peak_mib(src: Path) -> float:
        proc = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(src),
                               str(tmp_path / src.stem), "strips"], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout.splitlines()[-1])

    small, large = peak_mib(source(4096)), peak_mib(source(8192))
    assert large < 512, (small, large)
    assert large < 2 * small, (small, large)  # 4x the pixels, far from 4x the memory
    assert (tmp_path / "huge8192" / "huge8192.ktx2").stat().st_size > 0
