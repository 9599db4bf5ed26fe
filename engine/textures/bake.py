"""Bake images into streamable KTX2 textures: image -> mip chain -> BCn blocks -> KTX2 file.

One bake is three kinds of work, each a picklable top-level function so any
`concurrent.futures.Executor` can run it (a ProcessPoolExecutor by default, or
`dask.distributed.Client.get_executor()` to bake on a cluster):

  _prepare_task  load + decode the image, choose the exact format, build the mip chain
  _encode_task   encode a group of pieces: strips of a large level, or several small levels
  _write_task    assemble the levels and write the (optionally zstd-supercompressed) KTX2

Large levels are cut into strips whose heights are multiples of 4 (BCn blocks are stored
row by row, so the strips' blocks concatenate to the level's), which keeps every core busy
even when baking a single 8K texture; small mip-tail levels are grouped so that no task is
too small to be worth its pickling. PSNR is scored inside the encode tasks from the strips'
sums of squared error, so the source image never travels twice.

Inputs are read at their own precision (8-bit, 16-bit, float) and converted to the 8-bit
targets deliberately, by engine.textures.source_image: 16-bit is scaled with rounding, float
is linear light, HDR values need an explicit tone map (`tonemap=`, `--tonemap`) and values
a format cannot hold are refused with a TextureFormatError. PSNR is scored against the
input at that precision, so it is finite unless the texture holds the input exactly.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import TextureFormatError, UsageError
from ..formats import get
from . import tiled
from .decode import decode_image
from .encode import encode_image
from .ktx2_write import write_ktx2
from .mipgen import ColorSpace, generate_mips, quantize_unorm8
from .progress import Progress
from .quality import psnr_from_sse, reference_squared_error, squared_error
from .source_image import (
    NAMED_FILE_MAX_PIXELS,
    TONEMAPS,
    SourceImage,
    Tonemap,
    from_array,
    read_image,
    scale_16_to_8,
    to_target,
)
from .worker_life import watch_owner

from .bake_plan import (
    BASIS_CHOICES,
    DEFAULT_TASK_PIXELS,
    TASK_PIXELS,
    Piece,
    choose_format,
    psnr_channels,
)

log = logging.getLogger(__name__)


ImageInput = str | os.PathLike | tuple[str, np.ndarray]
_BYTE_PEAK2 = 255.0 * 255.0


@dataclass(frozen=True)
class BakeResult:
    """What one bake produced and what it cost. `seconds` is the CPU time of all the work
    for this file (summed over workers, so parallel bakes do not inflate it), and
    `mpx_per_s` is level-0 megapixels per such second: a per-core throughput."""

    source: str
    output: Path
    format: str
    width: int
    height: int
    levels: int
    bytes: int
    seconds: float
    mpx_per_s: float
    psnr_db: float


@dataclass(frozen=True)
class _Options:
    fmt: str
    srgb: bool
    zstd_level: int | None
    normal_map: bool
    tonemap: Tonemap | None = None
    max_pixels: int = NAMED_FILE_MAX_PIXELS


@dataclass
class _Prepared:
    source: str
    fmt_name: str
    levels: list[np.ndarray]
    psnr_channels: tuple[int, ...]
    seconds: float
    # What level 0 is scored against when the input had more than 8 bits (see
    # source_image.TargetInput); None: the level-0 bytes themselves.
    reference: np.ndarray | None = None
    space: str = "bytes"


@dataclass(frozen=True)
class _Failed:
    """An unreadable input, returned rather than raised by `_prepare_task` because
    TextureFormatError does not survive pickling (its __init__ takes (path, problem) but
    its args hold only the message), and a worker's exception must cross a process boundary."""

    path: str
    problem: str


@dataclass(frozen=True)
class _Encoded:
    level: int
    row0: int
    data: bytes
    sse: float
    count: int


@dataclass
class _FileState:
    """Bookkeeping of one file while its tasks are in flight in `bake_many`."""

    index: int
    out_path: Path
    prepared: _Prepared | None = None
    pending: int = 0
    encoded: list[_Encoded] = field(default_factory=list)
    seconds: float = 0.0
    psnr_db: float = 0.0


def load_rgba(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an image file as (H, W, 4) uint8 RGBA, upright per its EXIF orientation.

    16-bit images are scaled to bytes with rounding (not clipped); float images in [0, 1]
    are rounded to bytes as they are (no colour conversion); float values outside [0, 1]
    raise TextureFormatError (bake them with a tone map instead). Raises TextureFormatError
    naming the file for anything Pillow cannot read.
    """
    return _to_bytes(read_image(path))


def _to_bytes(src: SourceImage) -> np.ndarray:
    px = src.pixels
    if px.dtype == np.uint8:
        return px
    if px.dtype == np.uint16:
        return scale_16_to_8(px)
    if not np.isfinite(px).all() or px.min() < 0.0 or px.max() > 1.0:
        raise TextureFormatError(src.name, "float pixels outside [0, 1] need a tone map to be "
                                           "read as bytes (bake with --tonemap)")
    return quantize_unorm8(px)


def _colorspace(fmt_name: str, opts: _Options) -> ColorSpace:
    if opts.normal_map:
        return "normal"
    return "srgb" if get(fmt_name).srgb else "linear"


def _prepare(source: str, rgba: np.ndarray | None, opts: _Options) -> _Prepared:
    start = time.process_time()
    src = read_image(source, opts.max_pixels) if rgba is None else from_array(rgba, source)
    # Transparency (BC1's variant, PSNR channels) is judged on the bytes level 0 will hold.
    probe = _to_bytes(src) if src.pixels.dtype != np.float32 else None
    if probe is None:
        alpha = src.pixels[..., 3]
        probe = np.zeros(src.pixels.shape[:2] + (4,), np.uint8)
        probe[..., 3] = quantize_unorm8(np.clip(np.nan_to_num(alpha), 0.0, 1.0))
    fmt_name = choose_format(opts.fmt, opts.srgb, probe)
    target = to_target(src, fmt_name, srgb=get(fmt_name).srgb, tonemap_op=opts.tonemap,
                       normal_map=opts.normal_map)
    levels = generate_mips(target.signal, colorspace=_colorspace(fmt_name, opts))
    return _Prepared(source, fmt_name, levels, psnr_channels(fmt_name, levels[0]),
                     time.process_time() - start, target.reference, target.space)


def _prepare_task(source: str, rgba: np.ndarray | None, opts: _Options) -> _Prepared | _Failed:
    """Worker entry: `_prepare`, with an unreadable input reported as a value (see _Failed)."""
    try:
        return _prepare(source, rgba, opts)
    except TextureFormatError as exc:
        return _Failed(exc.path, exc.problem)


def _encode_task(pieces: list[Piece], fmt_name: str,
                 psnr_channels: tuple[int, ...]) -> tuple[list[_Encoded], float]:
    """Worker entry: encode pieces; level-0 pieces are decoded again and scored."""
    start = time.process_time()
    out = [_scored(piece, encode_image(piece.rgba, fmt_name), fmt_name, psnr_channels)
           for piece in pieces]
    return out, time.process_time() - start


def _scored(piece: Piece, data: bytes, fmt_name: str,
            psnr_channels: tuple[int, ...]) -> _Encoded:
    """A piece's blocks; level-0 pieces decoded again and scored in units of the peak,
    against what the user gave."""
    sse, count = 0.0, 0
    if piece.level == 0:
        h, w = piece.rgba.shape[:2]
        decoded = decode_image(fmt_name, data, w, h)
        if piece.reference is None:
            sse, count = squared_error(decoded, piece.rgba, psnr_channels)
            sse /= _BYTE_PEAK2
        else:
            sse, count = reference_squared_error(decoded, piece.reference, psnr_channels,
                                                 piece.space)
    return _Encoded(piece.level, piece.row0, data, sse, count)


#: Encodes a whole mip chain (level 0 first) to a format's blocks, in this process: the
#: GPU compute encoder (engine.gl.bc_encode) is one. It raises UsageError for what it
#: cannot take (a format it does not write, an image over its size limit); the bake then
#: encodes that file on the CPU pool.
ChainEncoder = Callable[[list[np.ndarray], str], list[bytes]]


def _chain_encoded(prep: _Prepared, encode_chain: ChainEncoder) -> list[bytes] | None:
    """The file's levels encoded by `encode_chain`, or None when it declines."""
    try:
        return encode_chain(prep.levels, prep.fmt_name)
    except UsageError as exc:
        log.info("%s: encoded on the CPU (%s)", prep.source, exc)
        return None


def _score_write_task(out_path: Path, fmt_name: str, levels: list[bytes], level0: Piece,
                      psnr_channels: tuple[int, ...], zstd_level: int | None
                      ) -> tuple[int, float, float, int]:
    """Worker entry for a chain encoded outside the pool: score level 0 (decoding it again
    is what the pool's encode tasks do in parallel) and write the file; returns (file bytes,
    CPU seconds, level 0's squared error and count)."""
    start = time.process_time()
    scored = _scored(level0, levels[0], fmt_name, psnr_channels)
    h, w = level0.rgba.shape[:2]
    nbytes, _ = _write_task(out_path, fmt_name, w, h, levels, zstd_level)
    return nbytes, time.process_time() - start, scored.sse, scored.count


def _write_task(out_path: Path, fmt_name: str, width: int, height: int, levels: list[bytes],
                zstd_level: int | None) -> tuple[int, float]:
    """Worker entry: write the KTX2 file, and beside it the tile-contiguous copy of a
    texture that will stream virtually; returns (file bytes, CPU seconds)."""
    start = time.process_time()
    if zstd_level is None:
        nbytes = write_ktx2(out_path, fmt_name, width, height, levels)
    else:
        nbytes = write_ktx2(out_path, fmt_name, width, height, levels, supercompression="zstd",
                            zstd_level=zstd_level)
    if max(width, height) >= tiled.BAKE_MIN_SIZE:
        tiled.write_sidecar(out_path)
    return nbytes, time.process_time() - start


def _plan(levels: list[np.ndarray], fmt_name: str, reference: np.ndarray | None = None,
          space: str = "bytes") -> list[list[Piece]]:
    """Group the levels into encode tasks of about `TASK_PIXELS` pixels: big levels are cut
    into strips of whole block rows, small levels are batched together. Level-0 pieces carry
    their rows of `reference` (the input at its own precision) for scoring."""
    target = TASK_PIXELS.get(get(fmt_name).family, DEFAULT_TASK_PIXELS)
    groups: list[list[Piece]] = []
    batch: list[Piece] = []
    batch_pixels = 0

    def ref(level: int, r: int, rows: int) -> np.ndarray | None:
        return reference[r:r + rows] if level == 0 and reference is not None else None

    for level, img in enumerate(levels):
        h, w = img.shape[:2]
        if h * w > target:
            rows = max(4, (target // w) // 4 * 4)
            groups.extend([Piece(level, r, img[r:r + rows], ref(level, r, rows), space)]
                          for r in range(0, h, rows))
            continue
        batch.append(Piece(level, 0, img, ref(level, 0, h), space))
        batch_pixels += h * w
        if batch_pixels >= target:
            groups.append(batch)
            batch, batch_pixels = [], 0
    if batch:
        groups.append(batch)
    return groups


def _assemble(encoded: list[_Encoded], count: int) -> tuple[list[bytes], float]:
    """Level byte strings (strips joined in row order) and level-0 PSNR from encoded pieces."""
    by_level: list[list[_Encoded]] = [[] for _ in range(count)]
    for e in encoded:
        by_level[e.level].append(e)
    levels = [b"".join(e.data for e in sorted(parts, key=lambda e: e.row0)) for parts in by_level]
    sse = sum(e.sse for e in by_level[0])
    n = sum(e.count for e in by_level[0])
    return levels, psnr_from_sse(sse, n, peak=1.0)


def _result(prep: _Prepared, out_path: Path, nbytes: int, seconds: float, psnr_db: float) -> BakeResult:
    h, w = prep.levels[0].shape[:2]
    return BakeResult(source=prep.source, output=out_path, format=prep.fmt_name, width=w, height=h,
                      levels=len(prep.levels), bytes=nbytes, seconds=seconds,
                      mpx_per_s=(w * h / 1e6) / seconds if seconds > 0 else float("inf"),
                      psnr_db=psnr_db)


def _bake_basis(source: str, rgba: np.ndarray | None, out_path: Path, opts: _Options,
                threads: int = 0) -> BakeResult:
    """UASTC / ETC1S output (KHR_texture_basisu's payloads): the same prepared mip chain as a
    BCn bake, encoded by basis_universal (engine.textures.basis), scored by transcoding level
    0 back to RGBA8 with the transcoder the engine reads it with."""
    from dataclasses import replace

    from . import basis
    from .reader import open_texture

    prep = _prepare(source, rgba, replace(opts, fmt="rgba8"))
    start = time.process_time()
    srgb = get(prep.fmt_name).srgb
    data = basis.encode_ktx2(prep.levels, opts.fmt, srgb=srgb, zstd_level=opts.zstd_level,
                             threads=threads)
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out_path)  # a reader never sees half a file
    psnr_db = float("nan")
    if basis.available():
        decoded = open_texture(out_path).transcode_rgba(0)  # type: ignore[attr-defined]
        if prep.reference is None:
            sse, count = squared_error(decoded, prep.levels[0], prep.psnr_channels)
            sse /= _BYTE_PEAK2
        else:
            sse, count = reference_squared_error(decoded, prep.reference, prep.psnr_channels,
                                                 prep.space)
        psnr_db = psnr_from_sse(sse, count, peak=1.0)
    prep.fmt_name = opts.fmt.upper() + ("_SRGB" if srgb else "")
    result = _result(prep, out_path, len(data), prep.seconds + time.process_time() - start,
                     psnr_db)
    log.info("baked %s -> %s (%s, %.1f dB)", source, out_path, prep.fmt_name, psnr_db)
    return result


def _bake_basis_task(source: str, rgba: np.ndarray | None, out_path: Path,
                     opts: _Options) -> BakeResult | _Failed:
    """Worker entry for bake_many: one whole Basis bake (the encoder threads inside)."""
    try:
        return _bake_basis(source, rgba, out_path, opts, threads=1)
    except TextureFormatError as exc:
        return _Failed(exc.path, exc.problem)


def _bake_inline(source: str, rgba: np.ndarray | None, out_path: Path, opts: _Options) -> BakeResult:
    if opts.fmt.lower() in BASIS_CHOICES:
        return _bake_basis(source, rgba, out_path, opts)
    prep = _prepare(source, rgba, opts)
    pieces = [p for g in _plan(prep.levels, prep.fmt_name, prep.reference, prep.space) for p in g]
    encoded, enc_s = _encode_task(pieces, prep.fmt_name, prep.psnr_channels)
    levels, psnr_db = _assemble(encoded, len(prep.levels))
    h, w = prep.levels[0].shape[:2]
    nbytes, write_s = _write_task(out_path, prep.fmt_name, w, h, levels, opts.zstd_level)
    result = _result(prep, out_path, nbytes, prep.seconds + enc_s + write_s, psnr_db)
    log.info("baked %s -> %s (%s, %.1f dB)", source, out_path, prep.fmt_name, psnr_db)
    return result


def bake_image(rgba: np.ndarray, out_path: str | os.PathLike[str], fmt: str = "bc7", srgb: bool = True,
               zstd_level: int | None = None, *, normal_map: bool = False,
               source: str = "<array>", tonemap: Tonemap | None = None) -> BakeResult:
    """Bake an in-memory image to the KTX2 file `out_path`, in this process (for many images
    at once use `bake_many` with (name, array) inputs).

    `rgba` is (H, W), (H, W, 2), (H, W, 3) or (H, W, 4) of uint8, uint16 or float values;
    16-bit is scaled to bytes with rounding; float is linear light and must lie in [0, 1]
    unless `tonemap` ("reinhard", "aces" or "clamp") says how to bring it there; see
    engine.textures.source_image for the rules, and for what PSNR is scored against."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return _bake_inline(source, rgba, out, _Options(fmt, srgb, zstd_level, normal_map, tonemap))


def bake_file(src: str | os.PathLike[str], out_dir: str | os.PathLike[str], fmt: str = "bc7",
              srgb: bool = True, zstd_level: int | None = None, *,
              normal_map: bool = False, tonemap: Tonemap | None = None) -> BakeResult:
    """Bake one image file to `out_dir/<stem>.ktx2`, in this process (`tonemap`: as for
    `bake_image`)."""
    out_path = Path(out_dir) / (Path(src).stem + ".ktx2")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return _bake_inline(os.fspath(src), None, out_path,
                        _Options(fmt, srgb, zstd_level, normal_map, tonemap))


def _split_input(item: ImageInput) -> tuple[str, np.ndarray | None, str]:
    """(source name, array or None, output stem) of a bake_many input."""
    if isinstance(item, tuple):
        name, rgba = item
        return name, rgba, Path(name).stem
    return os.fspath(item), None, Path(item).stem


def bake_many(inputs: Sequence[ImageInput], out_dir: str | os.PathLike[str], fmt: str = "bc7",
              srgb: bool = True, zstd_level: int | None = None, *, normal_map: bool = False,
              executor: Executor | None = None, jobs: int | None = None,
              progress: bool = True, tonemap: Tonemap | None = None,
              max_pixels: int = NAMED_FILE_MAX_PIXELS,
              encode_chain: ChainEncoder | None = None) -> list[BakeResult]:
    """Bake many images in parallel, over files and over the levels (and strips of levels)
    of each file. Inputs are image paths or (name, RGBA array) pairs; outputs go to
    `out_dir/<stem>.ktx2`; results come back in input order.

    `executor` runs the tasks (any concurrent.futures.Executor, e.g. a dask.distributed
    client's `get_executor()`); without one a ProcessPoolExecutor of `jobs` workers (default:
    all cores) is made and shut down here. At most about `jobs` files are prepared ahead of
    the encoders, so memory stays bounded however many inputs there are. The first unreadable
    input raises TextureFormatError and cancels what is still queued.

    Files of at least STRIP_BAKE_PIXELS pixels that libvips reads (the extra `huge`) are
    baked by strips instead (engine.textures.strip_bake: the same bytes, memory that does
    not grow with the image), one at a time over the same pool, unless `zstd_level` is set
    (a supercompressed level's size is only known once it is whole). Files above
    `max_pixels` are refused (Pillow's own guard, meant for files from strangers, is lifted
    up to it). `encode_chain` (see ChainEncoder) encodes each whole-image file's chain in
    this process instead of on the pool (decoding, mips and writing stay on the pool); files
    baked by strips are encoded on the pool regardless.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = _Options(fmt, srgb, zstd_level, normal_map, tonemap, max_pixels)
    if fmt.lower() in BASIS_CHOICES:
        return _bake_basis_many(inputs, out, opts, executor, jobs, progress)
    choose_format(fmt, srgb, np.zeros((1, 1, 4), np.uint8))  # reject a bad name before any work
    if tonemap is not None and tonemap not in TONEMAPS:
        raise ValueError(f"unknown tone map {tonemap!r}; choose from {', '.join(TONEMAPS)}")
    split = [_split_input(item) for item in inputs]
    stems = [stem for _, _, stem in split]
    dupes = sorted({s for s in stems if stems.count(s) > 1})
    if dupes:
        raise ValueError(f"several inputs would write the same output: {', '.join(dupes)}")

    huge = _strip_inputs(split, opts)
    workers = jobs or os.cpu_count() or 1
    own = executor is None
    pool = process_pool(workers, clean=encode_chain is not None) if own else executor
    assert pool is not None
    wall = time.perf_counter()
    with closing_pool(pool) if own else nullcontext(pool):
        by_strips = {i: _bake_strips(split[i][0], out / f"{split[i][2]}.ktx2", opts, pool,
                                     workers, progress) for i in huge}
        rest = [item for i, item in enumerate(split) if i not in by_strips]
        whole: list[BakeResult] = []
        if rest or not split:
            with Progress(len(rest), "bake", enabled=None if progress else False) as bar:
                whole = _run(pool, rest, out, opts, max(2, workers), bar, encode_chain)
    done = iter(whole)
    results = [by_strips[i] if i in by_strips else next(done) for i in range(len(split))]
    wall = time.perf_counter() - wall
    mpx = sum(r.width * r.height for r in results) / 1e6
    log.info("baked %d file(s), %.1f Mpx in %.2f s wall (%.1f Mpx/s)", len(results), mpx, wall,
             mpx / wall if wall > 0 else float("inf"))
    return results


def process_pool(workers: int, clean: bool) -> ProcessPoolExecutor:
    """The bake's worker pool; `clean`: workers from a fork server, for a process that holds
    a GL context (forking it, with the driver's threads, can deadlock the child). Its
    workers end with this process, also when it is killed (engine.textures.worker_life)."""
    clean = clean and "forkserver" in multiprocessing.get_all_start_methods()
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(
        "forkserver") if clean else None, initializer=watch_owner, initargs=(os.getpid(),))


#: Files at least this large are baked by strips where libvips can read them: the
#: whole-image bake holds about 20 bytes a pixel (a 4096 x 4096 image: about 320 MiB).
STRIP_BAKE_PIXELS = 1 << 24


def _strip_inputs(split: list[tuple[str, np.ndarray | None, str]], opts: _Options) -> list[int]:
    """Indices of the inputs to bake by strips (see bake_many)."""
    from .strip_bake import qualifies

    if opts.zstd_level is not None:
        return []
    found = []
    for i, (source, rgba, _) in enumerate(split):
        if rgba is None:
            info = qualifies(source, opts.max_pixels)
            if info is not None and info.width * info.height >= STRIP_BAKE_PIXELS:
                found.append(i)
    return found


def _bake_strips(source: str, out_path: Path, opts: _Options, pool: Executor, workers: int,
                 progress: bool | None) -> BakeResult:
    """One file through engine.textures.strip_bake, as a BakeResult."""
    from .strip_bake import bake_by_strips, plan

    found = plan(source, opts.fmt, opts.srgb, opts.normal_map, opts.max_pixels)
    nbytes, seconds, psnr_db, w, h, count = bake_by_strips(
        source, out_path, found, pool, workers, opts.max_pixels,
        progress=None if progress else False, encode=_encode_task)
    if max(w, h) >= tiled.BAKE_MIN_SIZE:  # read a tile row at a time: memory stays flat
        tiled.write_sidecar(out_path)
    log.info("baked %s -> %s by strips (%s, %.1f dB)", source, out_path, found.fmt_name, psnr_db)
    return BakeResult(source=source, output=out_path, format=found.fmt_name, width=w, height=h,
                      levels=count, bytes=nbytes, seconds=seconds,
                      mpx_per_s=(w * h / 1e6) / seconds if seconds > 0 else float("inf"),
                      psnr_db=psnr_db)


def _bake_basis_many(inputs: Sequence[ImageInput], out: Path, opts: _Options,
                     executor: Executor | None, jobs: int | None,
                     progress: bool) -> list[BakeResult]:
    """bake_many for UASTC/ETC1S: one task per file (basis_universal encodes a whole chain)."""
    split = [_split_input(item) for item in inputs]
    stems = [stem for _, _, stem in split]
    dupes = sorted({s for s in stems if stems.count(s) > 1})
    if dupes:
        raise ValueError(f"several inputs would write the same output: {', '.join(dupes)}")
    own = executor is None
    pool = ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1, initializer=watch_owner,
                               initargs=(os.getpid(),)) if own else executor
    assert pool is not None
    with closing_pool(pool) if own else nullcontext(pool):
        futures = [pool.submit(_bake_basis_task, source, rgba, out / f"{stem}.ktx2", opts)
                   for source, rgba, stem in split]
        results: list[BakeResult] = []
        with Progress(len(split), "bake", enabled=None if progress else False) as bar:
            for fut in futures:
                got = fut.result()
                if isinstance(got, _Failed):
                    raise TextureFormatError(got.path, got.problem)
                results.append(got)
                bar.advance(1, got.output.name)
        return results


def is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C, SIGTERM (the CLI's Interrupted) and the like: not an Exception."""
    return not isinstance(exc, Exception)


@contextmanager
def closing_pool(pool: Executor) -> Iterator[Executor]:
    """Shut `pool` down on leaving: waiting for it and cancelling its queue, except after an
    interrupt, when it is neither waited for nor cancelled.

    Why: on an interrupt the workers die (the CLI kills them; a terminal's Ctrl-C reaches
    them too), and CPython 3.11's pool can then hang whoever waits for it. Its manager
    thread fails every pending future as broken while shutdown(cancel_futures=True) cancels
    the same futures; when the cancel wins, the manager thread dies on InvalidStateError
    and its queue's feeder thread stays blocked on a pipe no worker reads. And a worker
    killed while writing its result leaves the manager reading half a message forever.
    Both were reproduced (SIGTERM to `bake` on a loaded 2-core machine: 1 run in 4, then
    1 in 10 with the cancel gone), so an interrupted run leaves the pool behind, and the
    CLI ends its process without joining it (engine.cli.entry_point)."""
    interrupted = False
    try:
        yield pool
    except BaseException as exc:
        interrupted = is_interrupt(exc)
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=not interrupted)


def _run(pool: Executor, split: list[tuple[str, np.ndarray | None, str]], out: Path, opts: _Options,
         ahead: int, bar: Progress, encode_chain: ChainEncoder | None = None) -> list[BakeResult]:
    """Drive the prepare -> encode -> write state machine of every file over `pool`; with
    `encode_chain`, the encode step runs in this process (see ChainEncoder)."""
    results: list[BakeResult | None] = [None] * len(split)
    states = [_FileState(i, out / f"{stem}.ktx2") for i, (_, _, stem) in enumerate(split)]
    futures: dict[Future, tuple[str, _FileState]] = {}
    next_file = 0
    prepared_waiting = 0  # files whose levels sit in this process waiting for encoders

    def start_more() -> None:
        nonlocal next_file, prepared_waiting
        while next_file < len(split) and prepared_waiting < ahead:
            source, rgba, _ = split[next_file]
            futures[pool.submit(_prepare_task, source, rgba, opts)] = ("prepare", states[next_file])
            next_file += 1
            prepared_waiting += 1

    try:
        start_more()
        while futures:
            done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
            for fut in done:
                kind, st = futures.pop(fut)
                if kind == "prepare":
                    prep = fut.result()
                    if isinstance(prep, _Failed):
                        raise TextureFormatError(prep.path, prep.problem)
                    st.prepared, st.seconds = prep, prep.seconds
                    if encode_chain is not None:
                        start = time.process_time()
                        levels = _chain_encoded(prep, encode_chain)
                        if levels is not None:
                            st.seconds += time.process_time() - start
                            level0 = Piece(0, 0, prep.levels[0], prep.reference, prep.space)
                            prep.reference = None
                            futures[pool.submit(_score_write_task, st.out_path, prep.fmt_name,
                                                levels, level0, prep.psnr_channels,
                                                opts.zstd_level)] = ("scored", st)
                            continue
                    groups = _plan(prep.levels, prep.fmt_name, prep.reference, prep.space)
                    prep.reference = None  # it travels with the level-0 pieces now
                    st.pending = len(groups)
                    for group in groups:
                        futures[pool.submit(_encode_task, group, prep.fmt_name,
                                            prep.psnr_channels)] = ("encode", st)
                elif kind == "encode":
                    encoded, secs = fut.result()
                    st.encoded.extend(encoded)
                    st.seconds += secs
                    st.pending -= 1
                    if st.pending == 0:
                        prep = st.prepared
                        assert prep is not None
                        levels, st.psnr_db = _assemble(st.encoded, len(prep.levels))
                        st.encoded = []
                        h, w = prep.levels[0].shape[:2]
                        futures[pool.submit(_write_task, st.out_path, prep.fmt_name, w, h, levels,
                                            opts.zstd_level)] = ("write", st)
                else:  # "write", or "scored": written and level 0 scored (_score_write_task)
                    nbytes, secs, *scored = fut.result()
                    if scored:
                        st.psnr_db = psnr_from_sse(scored[0], scored[1], peak=1.0)
                    prep = st.prepared
                    assert prep is not None
                    results[st.index] = _result(prep, st.out_path, nbytes, st.seconds + secs,
                                                st.psnr_db)
                    st.prepared = None
                    prepared_waiting -= 1
                    bar.advance(1, Path(st.out_path).name)
                    log.info("baked %s -> %s", prep.source, st.out_path)
            start_more()
    except BaseException as exc:
        if not is_interrupt(exc):  # see closing_pool: an interrupt leaves them to the pool
            for fut in futures:
                fut.cancel()
        raise
    return [r for r in results if r is not None]
