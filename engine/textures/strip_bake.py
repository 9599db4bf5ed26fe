"""Baking images too large to hold, with memory that does not grow with the image.

The whole-image bake (engine.textures.bake) decodes the source, builds every mip level in
float and keeps the encoded levels until the file is written: about 20 bytes a pixel. Here
every stage streams instead:

- the source is read by strips of rows through libvips (engine.textures.strips: tiled and
  striped TIFF, PNG and JPEG by rows);
- each mip level's rows are filtered from the finer level's rows as they arrive, with the
  same arithmetic as engine.textures.mipgen (linear light, alpha weighting, exact box
  footprints at odd sizes), keeping only the few rows a level's next output rows need;
- the rows of every level go to the encoder pool in pieces of whole block rows, and each
  encoded piece is written at its place in the KTX2 file (engine.textures.ktx2_write's
  StreamedKtx2: without supercompression every level's size and offset follow from the
  dimensions, so the level index is written first).

Row-local arithmetic makes the result the same bytes as the whole-image bake. What is held:
a strip of the source, a few float rows a level, and the pieces in flight.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TextureFormatError
from ..formats import get
from ..memory.sizes import mip_count, mip_dims
from . import strips
from .bake_plan import DEFAULT_TASK_PIXELS, TASK_PIXELS, Piece, choose_format, psnr_channels
from .ktx2_write import StreamedKtx2
from .mipgen import (
    ColorSpace,
    _box_weights,
    _downsample_axis,
    _to_rgba8,
    _to_working,
    halve_rows,
)
from .progress import Progress

log = logging.getLogger(__name__)

#: Source pixels read per strip (rows = this / width): a few MiB of bytes, four times that
#: in float while level 1 is filtered from it.
STRIP_PIXELS = 1 << 20
#: Pixels of the pieces waiting for or inside the encoders at most (4 bytes each in this
#: process, once more in the pipe): what bounds memory when the encoders fall behind.
INFLIGHT_PIXELS = 1 << 24
#: Pixels per encode piece at most (the whole-image bake's BC1 pieces are 4x larger): what a
#: worker holds is a few times this.
PIECE_PIXELS = 1 << 20


@dataclass(frozen=True)
class StripPlan:
    """What a strip bake needs to know before the first strip: the exact format, the space
    the mips are filtered in, and whether colour is weighted by alpha."""

    fmt_name: str
    colorspace: ColorSpace
    weight_alpha: bool
    psnr_channels: tuple[int, ...]


class _LevelFilter:
    """Level k's rows from level k-1's working-space rows, fed top to bottom.

    The vertical box filter of mipgen.downsample for this level, row by row: output row i
    needs source rows idx[:, i] with weights[:, i] (the same taps and float32 operations in
    the same order as the whole-image filter, so the same values), then the horizontal pass,
    which is per row anyway."""

    def __init__(self, width_in: int, height_in: int, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.halve = height_in == 2 * height
        self.same = height_in == height
        if not (self.halve or self.same):
            self.idx, self.weights = _box_weights(height_in, height)
        self.buf = np.empty((0, width_in, 4), np.float32)
        self.base = 0  # source row of buf[0]
        self.next_out = 0

    def feed(self, rows: np.ndarray) -> np.ndarray:
        """Append source rows; return the output rows they complete (possibly none)."""
        buf = np.concatenate([self.buf, rows]) if len(self.buf) else rows
        have = self.base + len(buf)  # source rows received so far
        if self.same:
            out, self.buf, self.base = buf, buf[:0], have
            self.next_out += len(out)
        elif self.halve:
            n = (have // 2) - self.next_out
            pairs = buf[:2 * n]
            lo, hi = pairs[0::2], pairs[1::2]
            out = lo * np.float32(0.5)
            out += hi * np.float32(0.5)
            self.buf = buf[2 * n:].copy() if 2 * n < len(buf) else buf[:0]
            self.base += 2 * n
            self.next_out += n
        else:
            last = self.idx.max(axis=0)  # the deepest source row each output row needs
            end = self.next_out
            while end < self.height and last[end] < have:
                end += 1
            sel = slice(self.next_out, end)
            out = np.zeros((end - self.next_out,) + buf.shape[1:], np.float32)
            for k in range(self.idx.shape[0]):
                out += buf[self.idx[k, sel] - self.base] * self.weights[k, sel][:, None, None]
            self.next_out = end
            keep = int(self.idx[:, end:].min()) if end < self.height else have
            self.buf = buf[keep - self.base:].copy()
            self.base = keep
        return _downsample_axis(out, self.width, 1) if len(out) else out


class _Rows:
    """Rows of one level gathered into encode pieces of whole block rows."""

    def __init__(self, level: int, width: int, height: int, piece_rows: int) -> None:
        self.level, self.width, self.height = level, width, height
        self.piece_rows = piece_rows
        self.parts: list[np.ndarray] = []
        self.count = 0  # rows gathered, not yet handed out
        self.row0 = 0  # level row of the first gathered row

    def add(self, rows: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
        self.parts.append(rows)
        self.count += len(rows)
        out = []
        done = self.row0 + self.count == self.height
        while self.count >= self.piece_rows or (done and self.count):
            n = min(self.piece_rows, self.count)
            block = np.concatenate(self.parts) if len(self.parts) > 1 else self.parts[0]
            out.append((self.level, self.row0, np.ascontiguousarray(block[:n])))
            self.parts = [block[n:]] if n < len(block) else []
            self.count -= n
            self.row0 += n
        return out


def plan(path: str, fmt: str, srgb: bool, normal_map: bool, max_pixels: int) -> StripPlan:
    """The format and filtering choices of the whole-image bake, decided from the file's
    header and (for images with an alpha band) one pass over its alpha."""
    amin = strips.alpha_min(path, max_pixels)
    probe = np.full((1, 1, 4), amin, np.uint8)
    fmt_name = choose_format(fmt, srgb, probe)
    space: ColorSpace = "normal" if normal_map else ("srgb" if get(fmt_name).srgb else "linear")
    weight_alpha = space != "normal" and amin < 255
    return StripPlan(fmt_name, space, weight_alpha, psnr_channels(fmt_name, probe))


class _EncodeQueue:
    """The strip bake's encode tasks in flight over a pool: pieces of a level's new rows go
    out alone when big, batched when small, with at most INFLIGHT_PIXELS (and 2 tasks per
    worker) out at once; finished ones are written into `out` and level 0's error summed."""

    def __init__(self, pool: Executor, workers: int, encode: Callable, plan_: StripPlan,
                 out: StreamedKtx2, target: int) -> None:
        self.pool, self.workers, self.encode = pool, workers, encode
        self.plan, self.out = plan_, out
        self.target = target
        self.futures: dict[Future, int] = {}
        self.inflight = 0
        self.sse = 0.0
        self.n_scored = 0
        self.worker_cpu = 0.0
        self.batch: list[Piece] = []
        self.batch_pixels = 0

    def collect(self, block: bool) -> None:
        if not self.futures:
            return
        done, _ = wait(list(self.futures), timeout=None if block else 0,
                       return_when=FIRST_COMPLETED)
        for fut in done:
            self.inflight -= self.futures.pop(fut)
            encoded, secs = fut.result()
            self.worker_cpu += secs
            for e in encoded:
                self.out.write(e.level, e.row0, e.data)
                if e.level == 0:
                    self.sse += e.sse
                    self.n_scored += e.count

    def submit(self, pieces: list[Piece], pixels: int) -> None:
        while self.futures and (self.inflight + pixels > INFLIGHT_PIXELS
                                or len(self.futures) >= 2 * self.workers):
            self.collect(block=True)
        task = self.pool.submit(self.encode, pieces, self.plan.fmt_name, self.plan.psnr_channels)
        self.futures[task] = pixels
        self.inflight += pixels
        self.collect(block=False)

    def hand_out(self, rows: _Rows, produced: np.ndarray) -> None:
        """Queue a level's new uint8 rows: big pieces alone, small levels batched."""
        for lv, row0, img in rows.add(produced):
            px = img.shape[0] * img.shape[1]
            if px >= self.target:
                self.submit([Piece(lv, row0, img)], px)
                continue
            self.batch.append(Piece(lv, row0, img))
            self.batch_pixels += px
            if self.batch_pixels >= self.target:
                self.submit(self.batch, self.batch_pixels)
                self.batch, self.batch_pixels = [], 0

    def drain(self) -> None:
        if self.batch:
            self.submit(self.batch, self.batch_pixels)
        while self.futures:
            self.collect(block=True)

    def cancel(self) -> None:
        for fut in self.futures:
            fut.cancel()


def _feed_strip(queue: _EncodeQueue, rows: list[_Rows], filters: list[_LevelFilter],
                strip: np.ndarray, height: int) -> None:
    """One source strip down the mip chain: level 0 as read, then each level filtered from
    the one above as far as the strip's rows reach."""
    plan_ = queue.plan
    queue.hand_out(rows[0], strip)
    if len(rows) == 1:
        return
    if height % 2 == 0:  # strips of even rows: level 1 straight from them
        work = halve_rows(strip, plan_.colorspace, plan_.weight_alpha)
        queue.hand_out(rows[1], _to_rgba8(work, plan_.colorspace, plan_.weight_alpha))
        first = 2
    else:
        work = _to_working(strip, plan_.colorspace, plan_.weight_alpha)
        first = 1
    for i in range(first, len(rows)):
        work = filters[i - 1].feed(work)
        if not len(work):
            break
        queue.hand_out(rows[i], _to_rgba8(work, plan_.colorspace, plan_.weight_alpha))


def bake_by_strips(path: str, out_path: Path, plan_: StripPlan, pool: Executor, workers: int,
                   max_pixels: int, *, encode: Callable,
                   progress: bool | None = None) -> tuple[int, float, float, int, int, int]:
    """Bake `path` to `out_path` by strips over `pool`; returns (file bytes, CPU seconds of
    all the work, level-0 PSNR in dB, width, height, levels). On any failure the partial
    file is removed. `encode` is engine.textures.bake._encode_task (passed in: the baker
    imports this module)."""
    from .quality import psnr_from_sse

    start_cpu = time.process_time()
    fmt_name = plan_.fmt_name
    width = strips.info(path, max_pixels).width
    width, height, source = strips.strips(path, max_pixels, rows=strip_rows(width))
    count = mip_count(width, height)
    target = min(PIECE_PIXELS, TASK_PIXELS.get(get(fmt_name).family, DEFAULT_TASK_PIXELS))
    dims = [mip_dims(width, height, i) for i in range(count)]
    rows = [_Rows(i, w, h, h if w * h <= target else max(4, (target // w) // 4 * 4))
            for i, (w, h) in enumerate(dims)]
    filters = [_LevelFilter(*dims[i - 1], *dims[i]) for i in range(1, count)]
    out = StreamedKtx2(out_path, fmt_name, width, height, count)
    queue = _EncodeQueue(pool, workers, encode, plan_, out, target)
    label = f"bake {Path(path).name} by strips"
    try:
        with Progress(height, label, enabled=progress, unit="row", log_interval=10.0) as bar:
            for y, strip in source:
                _feed_strip(queue, rows, filters, strip, height)
                bar.advance(len(strip))
            queue.drain()
        for r in rows:
            if r.row0 != r.height:
                raise TextureFormatError(path, f"level {r.level} got {r.row0} of {r.height} rows")
        nbytes = out.commit()
    except BaseException:
        queue.cancel()
        out.abort()
        raise
    seconds = time.process_time() - start_cpu + queue.worker_cpu
    return (nbytes, seconds, psnr_from_sse(queue.sse, queue.n_scored, peak=1.0), width, height,
            count)


def strip_rows(width: int) -> int:
    """Source rows per strip for an image `width` wide: an even number, so that every strip
    of an even-height image halves into whole rows of level 1."""
    return max(2, min(256, STRIP_PIXELS // max(1, width)) // 2 * 2)


def qualifies(path: str, max_pixels: int) -> strips.StripInfo | None:
    """The file's StripInfo when it can be baked by strips (libvips installed and reads it,
    8-bit sRGB or grey without an ICC profile, upright), else None."""
    if not strips.available() or not os.path.isfile(path):
        return None
    try:
        found = strips.info(path, 1 << 62)
    except TextureFormatError:
        return None  # libvips cannot read it (or not upright): the whole-image bake says why
    if found.width * found.height > max_pixels:
        raise TextureFormatError(path, f"{found.width}x{found.height} = "
                                       f"{found.width * found.height} pixels is over the limit "
                                       f"of {max_pixels}; raise it with --max-pixels")
    return found if found.plain8 else None
