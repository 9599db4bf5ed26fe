"""The bake pipeline on real photographs: formats, quality, parallel bakes, errors, CLI."""
from __future__ import annotations

from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import engine.textures
from engine.cli import main as cli_main
from engine.errors import TextureFormatError
from engine.memory.sizes import level_bytes, mip_count, mip_dims
from engine.textures import bake
from engine.textures.bake import (
    bake_file,
    bake_image,
    bake_many,
    choose_format,
    load_rgba,
)
from engine.textures.decode import decode_image
from engine.textures.encode import encode_image
from engine.textures.quality import psnr, ssim

PHOTOS = Path(__file__).resolve().parent.parent / "assets" / "photos"


@pytest.fixture(scope="module")
def crops(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """256x256 centre crops of the photos, small enough for quick tests on 2 cores."""
    out = tmp_path_factory.mktemp("crops")
    paths = []
    for src in sorted(PHOTOS.glob("*.jpg")):
        im = Image.open(src).convert("RGB")
        l, t = (im.width - 256) // 2, (im.height - 256) // 2
        path = out / f"{src.stem}.png"
        im.crop((l, t, l + 256, t + 256)).save(path)
        paths.append(path)
    assert len(paths) >= 3
    return paths


# Thresholds a bit under what etcpak reaches on these crops (BC7 ~42-47 dB, BC1 ~31-36 dB).
@pytest.mark.parametrize("fmt,name,min_db", [
    ("bc7", "BC7_SRGB", 38.0), ("bc1", "BC1_RGB_SRGB", 30.0), ("bc3", "BC3_SRGB", 30.0),
    ("bc4", "BC4", 34.0), ("bc5", "BC5", 34.0), ("rgba8", "RGBA8_SRGB", float("inf")),
])
def test_bake_photo_per_format(tmp_path: Path, crops: list[Path], fmt: str, name: str, min_db: float) -> None:
    src = next(p for p in crops if p.stem == "astronaut")
    result = bake_file(src, tmp_path, fmt)
    assert result.format == name
    assert (result.width, result.height, result.levels) == (256, 256, 9)
    assert result.psnr_db >= min_db
    assert result.output == tmp_path / "astronaut.ktx2"
    assert result.bytes == result.output.stat().st_size
    assert result.seconds > 0 and result.mpx_per_s > 0

    tex = engine.textures.open(result.output)
    assert tex.format == name and len(tex.levels) == 9
    source = load_rgba(src)
    channels = {"bc4": [0], "bc5": [0, 1]}.get(fmt, [0, 1, 2])
    decoded = engine.textures.decode_rgba(tex, 0)
    # The reader's decode scores the file exactly as the baker scored its blocks.
    assert psnr(decoded, source, channels) == pytest.approx(result.psnr_db, abs=1e-6)
    if fmt == "bc7":
        assert ssim(decoded, source, channels) > 0.97


def test_mip_levels_in_the_file_are_the_linear_light_chain(tmp_path: Path, crops: list[Path]) -> None:
    result = bake_file(crops[0], tmp_path, "rgba8")
    tex = engine.textures.open(result.output)
    chain = engine.textures.mipgen.generate_mips(load_rgba(crops[0]))
    for i in range(len(chain)):
        assert np.array_equal(engine.textures.decode_rgba(tex, i), chain[i])


def test_odd_sized_image_has_exact_level_sizes(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (19, 37, 4), np.uint8)
    img[..., 3] = 255
    result = bake_image(img, tmp_path / "odd.ktx2", "bc7", srgb=False)
    tex = engine.textures.open(result.output)
    assert tex.format == "BC7" and len(tex.levels) == mip_count(37, 19)
    for i, lvl in enumerate(tex.levels):
        assert (lvl.width, lvl.height) == mip_dims(37, 19, i)
        assert len(tex.read_level(i)) == level_bytes("BC7", lvl.width, lvl.height)


@pytest.mark.parametrize("w,h", [(1, 1), (2, 2), (3, 5), (4, 4), (13, 9)])
def test_encode_block_count_matches_real_dimensions(w: int, h: int) -> None:
    img = np.random.default_rng(w * h).integers(0, 256, (h, w, 4), np.uint8)
    for fmt in ("BC1_RGB", "BC1_RGBA", "BC3", "BC4", "BC5", "BC7"):
        data = encode_image(img, fmt)
        assert len(data) == level_bytes(fmt, w, h)
        assert decode_image(fmt, data, w, h).shape == (h, w, 4)


def test_strips_concatenate_to_the_whole_level() -> None:
    img = load_rgba(PHOTOS / "chelsea.jpg")[:64, :100]
    for fmt in ("BC1_RGB", "BC7"):
        strips = b"".join(encode_image(img[r:r + 8], fmt) for r in range(0, 64, 8))
        assert strips == encode_image(img, fmt)


def test_bc1_punch_through_alpha(tmp_path: Path) -> None:
    img = load_rgba(PHOTOS / "coffee.jpg")[:64, :64].copy()
    yy, xx = np.mgrid[:64, :64]
    img[..., 3] = np.where((yy - 32) ** 2 + (xx - 32) ** 2 < 20 ** 2, 255, 0)
    assert choose_format("bc1", True, img) == "BC1_RGBA_SRGB"
    result = bake_image(img, tmp_path / "cut.ktx2", "bc1")
    assert result.format == "BC1_RGBA_SRGB"
    decoded = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert np.array_equal(decoded[..., 3], img[..., 3])
    opaque = img[..., 3] == 255
    assert psnr(decoded[opaque][:, :3], img[opaque][:, :3]) > 28


def test_choose_format() -> None:
    opaque = np.full((4, 4, 4), 255, np.uint8)
    holes = opaque.copy()
    holes[0, 0, 3] = 0
    assert choose_format("bc1", True, opaque) == "BC1_RGB_SRGB"
    assert choose_format("bc1", False, holes) == "BC1_RGBA"
    assert choose_format("BC7", False, opaque) == "BC7"
    assert choose_format("bc3", True, opaque) == "BC3_SRGB"
    assert choose_format("bc4", True, opaque) == "BC4"
    assert choose_format("bc5", True, opaque) == "BC5"
    with pytest.raises(ValueError):
        choose_format("astc", True, opaque)


def test_zstd_bake_round_trip(tmp_path: Path, crops: list[Path]) -> None:
    plain = bake_file(crops[0], tmp_path / "plain", "bc1")
    packed = bake_file(crops[0], tmp_path / "zstd", "bc1", zstd_level=9)
    assert packed.bytes < plain.bytes
    a, b = engine.textures.open(plain.output), engine.textures.open(packed.output)
    assert all(a.read_level(i) == b.read_level(i) for i in range(len(a.levels)))


def test_unreadable_input_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(TextureFormatError, match="broken.png"):
        bake_file(bad, tmp_path / "out")
    with pytest.raises(TextureFormatError, match="missing.png"):
        bake_file(tmp_path / "missing.png", tmp_path / "out")


@pytest.mark.slow
def test_process_pool_bake_matches_serial_bake(tmp_path: Path, crops: list[Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Small tasks so the 256x256 levels really are cut into strips across processes.
    monkeypatch.setattr(bake, "TASK_PIXELS", {"BC7": 64 * 256})
    rgba = load_rgba(crops[1])[:100, :60]
    inputs = [*crops, ("generated", rgba)]
    results = bake_many(inputs, tmp_path / "pool", "bc7", jobs=2, progress=False)
    assert [Path(r.output).stem for r in results] == [p.stem for p in crops] + ["generated"]
    assert results[-1].source == "generated" and (results[-1].width, results[-1].height) == (60, 100)
    for r in results[:-1]:
        serial = bake_file(r.source, tmp_path / "serial", "bc7")
        assert Path(r.output).read_bytes() == serial.output.read_bytes()
        assert r.psnr_db == pytest.approx(serial.psnr_db)
        assert r.bytes == serial.bytes


def test_bake_many_with_a_given_executor_and_an_unreadable_file(tmp_path: Path, crops: list[Path]) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff garbage")
    with ProcessPoolExecutor(max_workers=2) as pool:
        ok = bake_many(crops[:2], tmp_path / "ok", "bc1", executor=pool, progress=False)
        assert len(ok) == 2 and all(r.psnr_db > 30 for r in ok)
        with pytest.raises(TextureFormatError, match="bad.jpg"):
            bake_many([crops[0], bad], tmp_path / "bad", "bc1", executor=pool, progress=False)


def test_bake_many_rejects_colliding_outputs(tmp_path: Path, crops: list[Path]) -> None:
    with pytest.raises(ValueError, match="astronaut"):
        bake_many([crops[0], ("astronaut", np.zeros((4, 4, 4), np.uint8))], tmp_path, progress=False)


def test_cli_prints_a_table(tmp_path: Path, crops: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["bake"] + [str(p) for p in crops[:2]] + ["-o", str(tmp_path), "--format", "bc1",
                                                   "--zstd", "3", "--jobs", "2"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "PSNR" in out and "Mpx/s" in out
    for p in crops[:2]:
        assert f"{p.stem}.ktx2" in out
        assert (tmp_path / f"{p.stem}.ktx2").exists()


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.png"
    bad.write_text("nope")
    assert cli_main(["bake", str(bad), "-o", str(tmp_path / "o"), "--jobs", "1", "--no-progress"]) == 1
    assert "x.png" in capsys.readouterr().err
    assert cli_main(["bake", "-o", str(tmp_path)]) == 2
    assert cli_main(["bake", str(bad), "-o", str(tmp_path), "--format", "astc"]) == 2


def test_progress_bar_draws_only_when_asked() -> None:
    import io

    from engine.textures.progress import Progress

    quiet = io.StringIO()  # not a TTY: silent by default
    with Progress(2, "bake", stream=quiet) as bar:
        bar.advance(2)
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    with Progress(2, "bake", stream=loud, enabled=True) as bar:
        bar.advance(1, "a.ktx2")
        bar.advance(1, "b.ktx2")
    text = loud.getvalue()
    assert "2/2" in text and "b.ktx2" in text and text.endswith("\n")


class _FirstFails(Executor):
    """An executor whose first task fails with `error` and whose others never finish."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.futures = error, []

    def submit(self, fn, /, *args, **kwargs):
        fut: Future = Future()
        if not self.futures:
            fut.set_exception(self.error)
        self.futures.append(fut)
        return fut


@pytest.mark.parametrize("error,cancelled", [(ValueError("bad"), True),
                                             (KeyboardInterrupt(), False)])
def test_an_interrupt_leaves_pending_work_to_the_pool(tmp_path, error, cancelled):
    """A failure cancels the queued work; an interrupt must not: its workers are dying, and on
    CPython 3.11 cancelling while the pool fails the same futures as broken kills the pool's
    manager thread and hangs the interpreter's exit (a SIGTERM to `bake` under load)."""
    pool = _FirstFails(error)
    split = [(f"img{i}.png", np.zeros((8, 8, 4), np.uint8), f"img{i}") for i in range(3)]
    with bake.Progress(3, enabled=False) as bar, pytest.raises(type(error)):
        bake._run(pool, split, tmp_path, bake._Options("bc7", True, None, False, None), 2, bar)
    assert len(pool.futures) == 2  # two prepares in flight, the first failed
    assert pool.futures[1].cancelled() is cancelled


class _Recording(Executor):
    def __init__(self) -> None:
        self.shutdowns: list[tuple[bool, bool]] = []

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.shutdowns.append((wait, cancel_futures))


@pytest.mark.parametrize("error,expected", [(None, (True, True)), (ValueError("bad"), (True, True)),
                                            (KeyboardInterrupt(), (False, False))])
def test_closing_pool_leaves_an_interrupted_pool_behind(error, expected):
    """An interrupted run neither waits for its pool nor cancels its queue (either can hang
    on CPython 3.11 once the workers are killed); any other ending waits and cancels."""
    pool = _Recording()
    with pytest.raises(type(error)) if error else nullcontext():
        with bake.closing_pool(pool):
            if error:
                raise error
    assert pool.shutdowns == [expected]
