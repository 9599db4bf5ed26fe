"""Pictures made in the background: a process pool writing each image's first pictures (its
embedded EXIF thumbnail, its thumbnail: what replaces its placeholder on a cold wall) and its
full-detail chunk textures into the cache, in the order the screen asks for them
(engine.view.priority), a few jobs ahead of the pool.

The render thread calls `pump(order)` once a frame: it collects what finished (never
waiting) and submits the next jobs in `order`. An image of several chunks is first decoded
once into a staging file (cache.stage_upright), then its chunks are encoded from it each on
its own; the staging file is removed when its last chunk is written.

With a GPU encoder (engine.gl.bc_encode) the workers only decode (cache.chunk_pixels) and
write (cache.write_chunk); the blocks and mips are made on the render thread, at most
GPU_FRAME_BUDGET_S of dispatches a frame (a chunk's pixels are uploaded when its encode
starts), so `lab bench encode`'s faster side can do the encoding.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..gl.bc_encode import EncodeJob, GpuBlockEncoder
from ..textures.bake import choose_format
from ..textures.durable import refused, warn_uncached
from ..textures.worker_life import watch_owner
from . import cache
from .priority import THUMB, ViewRect, fill_order

log = logging.getLogger(__name__)
progress = logging.getLogger("engine.progress")

#: Seconds between the encoder's progress lines.
PROGRESS_EVERY_S = 5.0


#: Seconds of GPU encoding a frame spends on the render thread (a few ms of a 60 Hz frame).
GPU_FRAME_BUDGET_S = 0.004
#: Decoded chunks waiting for the GPU at most (each holds its RGBA pixels in memory), and
#: one more for the chunk the screen wants most.
GPU_READY_MAX = 2


#: Scheduling niceness of the background encoder's workers: below the render loop, so
#: frames keep their pace while full detail is made on the same cores.
BACKGROUND_NICE = 10


def detail_slots(workers: int) -> int:
    """Detail jobs (stages and chunks) in the pool at most: one a worker and a few queued.
    A detail job takes about a second of a core and the pool runs its queue in order, so a
    deeper queue makes a zoom's new target wait behind whole jobs made for the screen
    before; first pictures (tens of milliseconds each) may queue deeper."""
    return workers + max(1, workers // 8)


def _lower_priority(increment: int) -> None:
    try:
        os.nice(increment)
    except OSError:  # not permitted here: run at the same priority
        pass


def default_workers(cores: int | None) -> int:
    """Worker processes for the thumbnails and full detail of a machine of `cores` cores
    (os.cpu_count(), None where unknown): every core, since the workers run niced below
    the render loop (BACKGROUND_NICE), so frames keep their pace while decoding uses the
    whole machine."""
    return max(1, cores or 1)


def process_pool(workers: int, background: bool = False) -> ProcessPoolExecutor:
    """A pool whose workers do not inherit the render process's threads and GL context:
    forked from a clean server process where the platform has one (forking a process with
    running I/O threads can deadlock the child), else spawned. `background` lowers the
    workers' priority (BACKGROUND_NICE). Every worker ends with this process, also when it
    is killed (engine.textures.worker_life)."""
    methods = multiprocessing.get_all_start_methods()
    method = "forkserver" if "forkserver" in methods else "spawn"
    nice = BACKGROUND_NICE if background and hasattr(os, "nice") else 0
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                               initializer=_start_worker, initargs=(os.getpid(), nice))


def _start_worker(owner: int, nice: int) -> None:
    watch_owner(owner)
    if nice:
        _lower_priority(nice)


Key = tuple[int, int]  # (image index, chunk number; EMBEDDED or THUMB: a first picture)


def _pixels(job: Job) -> int:
    x0, y0, x1, y1 = job.box
    return (x1 - x0) * (y1 - y0)


@dataclass(frozen=True)
class Job:
    item: int
    k: int
    source: str
    entry: str
    box: tuple[int, int, int, int]
    staged: bool  # one of several chunks: read from the image's staging file

    @property
    def detail(self) -> bool:
        return self.k >= 0


@dataclass
class _GpuWork:
    key: Key
    format_name: str
    width: int
    height: int
    job: EncodeJob


def gpu_job_bytes(width: int, height: int) -> int:
    """GPU memory a chunk's encode holds while it runs: its RGBA8 source with every mip and
    the chain's blocks (at most 16 bytes a block, BC7)."""
    from ..memory.sizes import mip_count, texture_bytes

    levels = mip_count(width, height)
    return texture_bytes("RGBA8", width, height, levels=levels) + \
        texture_bytes("BC7", width, height, levels=levels)


class DetailEncoder:
    """`gpu`: encode on the GPU (see module); the encoder is released by `close()`;
    `thumb_edge`: the edge of the thumbnails its THUMB jobs make."""

    #: Bytes a chunk's GPU encode (source chain and blocks) may take: the budget's room left,
    #: which `ImageWall.hooks` sets each frame (None before that, or without the hooks: no
    #: limit); a chunk that does not fit is encoded by the pool instead.
    gpu_headroom: int | None = None

    def __init__(self, jobs: Sequence[Job], fmt: str, chunk: int, workers: int,
                 max_pixels: int, gpu: GpuBlockEncoder | None = None,
                 thumb_edge: int = cache.THUMB_EDGE) -> None:
        self.jobs: dict[Key, Job] = {(j.item, j.k): j for j in jobs}
        self.fmt, self.chunk, self.workers, self.max_pixels = fmt, chunk, workers, max_pixels
        self.thumb_edge = thumb_edge
        self._pool: ProcessPoolExecutor | None = None
        self._running: dict[Future, tuple[str, Any]] = {}
        self._staged: dict[int, bool] = {}  # item -> staging file written (False: in flight)
        self._left: dict[int, int] = {}  # item -> staged chunks not written yet
        for j in jobs:
            if j.staged:
                self._left[j.item] = self._left.get(j.item, 0) + 1
        self._failed: list[tuple[str, str]] = []
        self._stale: set[Future] = set()  # running when their folder was left (`_refused`)
        self._dead: set[int] = set()  # items whose source failed: nothing more is tried
        self.cpu_seconds = 0.0
        self._total = sum(j.detail for j in jobs)
        self._total_px = sum(_pixels(j) for j in jobs if j.detail)
        self._done = self._done_px = 0
        self._started: float | None = None
        self._said = 0.0
        self._gpu = gpu
        self._ready: list[tuple[Key, Any]] = []  # decoded chunks waiting for the GPU
        self._work: _GpuWork | None = None
        self._order: Sequence[Key] = ()  # the last order asked for

    @property
    def pending(self) -> int:
        return len(self.jobs)

    def order(self, parts: Mapping[Key, Any], view: ViewRect) -> list[Key]:
        """The keys still to make, most wanted first (`parts`: key -> object with .rect)."""
        keys = [k for k in parts if k in self.jobs]
        return [keys[i] for i in fill_order([k for _, k in keys],
                                            [parts[k].rect for k in keys], view)]

    def _submit(self, order: Sequence[Key]) -> None:
        if self._pool is None:
            self._pool = process_pool(self.workers, background=True)
        self._order = order
        busy = {v[1] for v in self._running.values()} | {k for k, _ in self._ready}
        if self._work is not None:
            busy.add(self._work.key)
        detail = sum(kind != "first" for kind, _ in self._running.values())
        slots = detail_slots(self.workers)
        seen_detail = False
        for key in order:
            if len(self._running) >= 2 * self.workers:
                return
            job = self.jobs.get(key)
            if job is None or job.item in self._dead:
                continue
            lead = job.detail and not seen_detail  # the chunk the screen wants most
            seen_detail = seen_detail or job.detail
            if key in busy:
                continue
            if job.detail and detail >= slots:
                continue  # first pictures further on may still go
            if not job.detail:
                fut = self._pool.submit(cache.make_thumbnail, job.source, job.entry,
                                        self.thumb_edge, self.fmt, self.max_pixels) \
                    if job.k == THUMB else self._pool.submit(cache.make_embedded, job.source,
                                                             job.entry, self.fmt,
                                                             self.max_pixels)
                self._running[fut] = ("first", key)
                busy.add(key)
                continue
            if job.staged and self._staged.get(job.item) is not True:
                if job.item not in self._staged:
                    self._staged[job.item] = False
                    fut = self._pool.submit(cache.stage_upright, job.source, job.entry,
                                            self.fmt, self.chunk, self.max_pixels)
                    self._running[fut] = ("stage", job.item)
                    detail += 1
                continue
            if self._gpu is not None:
                pixels = sum(v[0] == "pixels" for v in self._running.values())
                if pixels + len(self._ready) >= GPU_READY_MAX + lead:
                    continue  # stages may still start; chunks wait for the GPU to catch up,
                    # but the most wanted one is decoded at once (a zoom's new target)
                fut = self._pool.submit(cache.chunk_pixels, job.source, job.entry, self.fmt,
                                        self.chunk, job.k, job.box, job.staged,
                                        self.max_pixels)
                self._running[fut] = ("pixels", key)
            else:
                fut = self._pool.submit(cache.encode_chunk, job.source, job.entry, self.fmt,
                                        self.chunk, job.k, job.box, job.staged,
                                        self.max_pixels)
                self._running[fut] = ("chunk", key)
            busy.add(key)
            detail += 1

    def _collect(self, finished: Sequence[Future]) -> list[tuple[Key, str]]:
        done: list[tuple[Key, str]] = []
        for fut in finished:
            kind, what = self._running.pop(fut)
            if fut in self._stale:  # made for the folder left behind: made again
                self._stale.discard(fut)
                continue
            try:
                result = fut.result()
            except Exception as exc:  # noqa: BLE001 - a worker died (memory, a signal)
                if refused(exc):
                    self._refused(exc)
                    continue
                job = self.jobs.get(what) if kind != "stage" else None
                source = job.source if job else next(
                    (j.source for j in self.jobs.values() if j.item == what), "?")
                result = cache.Failed(source, f"{type(exc).__name__}: {exc}")
            if kind == "first":
                job = self.jobs.pop(what, None)
                if job is None:  # its image failed meanwhile
                    continue
                if isinstance(result, cache.Failed):
                    if job.k == THUMB:  # the image cannot be decoded: nor its detail
                        self._fail(job.item, result)
                    continue  # an embedded thumbnail that did not parse: the thumbnail comes
                done.append((what, str(cache.thumb_path(Path(job.entry), self.thumb_edge)
                                       if job.k == THUMB else
                                       cache.embedded_path(Path(job.entry)))))
                continue
            if isinstance(result, cache.Failed):
                self._fail(what if kind == "stage" else what[0], result)
                continue
            if kind == "pixels":
                if what in self.jobs:
                    self._ready.append((what, result))
                continue
            self.cpu_seconds += float(result)
            if kind == "stage":
                self._staged[what] = True
                continue
            job = self.jobs.pop(what)
            self._done += 1
            self._done_px += _pixels(job)
            done.append((what, str(cache.chunk_path(Path(job.entry), self.fmt, self.chunk,
                                                    job.k))))
            if job.staged:
                self._left[job.item] -= 1
                if not self._left[job.item]:
                    cache.drop_staging(Path(job.entry), self.fmt, self.chunk)
        return done

    def _fail(self, item: int, failed: cache.Failed) -> None:
        """Image `item` cannot be read: its jobs are dropped and nothing more is tried."""
        self._dead.add(item)
        self._failed.append((failed.path, failed.problem))
        for key in [k for k in self.jobs if k[0] == item]:
            del self.jobs[key]

    def _encode_on_gpu(self, budget_s: float | None) -> None:
        """Spend up to `budget_s` (None: no limit) encoding decoded chunks on the GPU; each
        finished chain goes to the pool to be written."""
        start = time.perf_counter()
        while self._work is not None or self._ready:
            left = None if budget_s is None else budget_s - (time.perf_counter() - start)
            if left is not None and left <= 0:
                return
            if self._work is None:
                key, rgba = self._ready.pop(self._most_wanted_ready())
                if key not in self.jobs:  # its image failed meanwhile
                    continue
                h, w = rgba.shape[:2]
                if self.gpu_headroom is not None and gpu_job_bytes(w, h) > self.gpu_headroom:
                    job = self.jobs[key]  # no room under the budget: the pool encodes it
                    fut = self._pool.submit(cache.encode_chunk, job.source, job.entry,
                                            self.fmt, self.chunk, job.k, job.box, job.staged,
                                            self.max_pixels)
                    self._running[fut] = ("chunk", key)
                    continue
                name = choose_format(self.fmt, True, rgba)
                self._work = _GpuWork(key, name, rgba.shape[1], rgba.shape[0],
                                      self._gpu.start_mipmapped(rgba, name))
            work = self._work
            if left is None:
                work.job.run()
            elif not work.job.step(left):
                return
            levels = work.job.result()
            work.job.release()
            self._work = None
            job = self.jobs.get(work.key)
            if job is None:
                continue
            fut = self._pool.submit(cache.write_chunk, job.entry, self.fmt, self.chunk, job.k,
                                    work.format_name, work.width, work.height, levels,
                                    job.staged)
            self._running[fut] = ("chunk", work.key)

    def _most_wanted_ready(self) -> int:
        """The index in `_ready` of the decoded chunk the screen wants first (the view may
        have moved since it was decoded)."""
        ready = {key: i for i, (key, _) in enumerate(self._ready)}
        return next((ready[k] for k in self._order if k in ready), 0)

    def pump(self, order: Sequence[Key]) -> list[tuple[Key, str]]:
        """Collect finished chunks (key, file) without waiting; submit the next in `order`;
        with a GPU encoder, encode for up to GPU_FRAME_BUDGET_S."""
        done = self._collect([f for f in self._running if f.done()])
        if self.jobs:
            self._submit(order)
            if self._gpu is not None:
                self._encode_on_gpu(GPU_FRAME_BUDGET_S)
        self._report(bool(done))
        return done

    def _report(self, changed: bool) -> None:
        """A progress line every PROGRESS_EVERY_S while encoding (chunks, megapixels, rate,
        time left) and one when everything is written."""
        if not self._total:  # first pictures only: the wall's own progress says
            return
        now = time.monotonic()
        if self._started is None:
            self._started = self._said = now
            progress.info("full detail: %d chunk(s), %.0f Mpx to encode with %d worker(s)",
                          self._total, self._total_px / 1e6, self.workers)
            return
        if not changed:
            return
        secs = now - self._started
        rate = self._done_px / 1e6 / secs if secs > 0 else 0.0
        if not self.jobs:
            progress.info("full detail: %d/%d chunk(s) done in %.1f s, %.1f Mpx/s (%.1f s of "
                          "worker CPU)", self._done, self._total, secs, rate, self.cpu_seconds)
        elif now - self._said >= PROGRESS_EVERY_S:
            left = (self._total_px - self._done_px) / 1e6 / rate if rate > 0 else float("nan")
            progress.info("full detail: %d/%d chunk(s), %.0f/%.0f Mpx, %.1f Mpx/s, about %.0f s "
                          "left", self._done, self._total, self._done_px / 1e6,
                          self._total_px / 1e6, rate, left)
            self._said = now

    def wait_for(self, keys: Sequence[Key], order: Sequence[Key]) -> list[tuple[Key, str]]:
        """Like `pump`, but return only once every job of `keys` is written (or failed)."""
        want = set(keys)
        first = [k for k in order if k in want] + [k for k in order if k not in want]
        done = self.pump(first)
        while (self._running or self._ready or self._work) and \
                any(k in self.jobs for k in want):
            if self._ready or self._work:
                self._encode_on_gpu(None)
                finished = [f for f in self._running if f.done()]
            else:
                finished, _ = wait(list(self._running), return_when=FIRST_COMPLETED)
            got = self._collect(list(finished))
            done += got
            self._submit(first)
            self._report(bool(got))
        return done

    def _refused(self, exc: BaseException) -> None:
        """The cache folder stopped taking files (full, read-only, over quota): the chunks
        still to make move to the run's spare folder (`cache.spare_root`, removed at exit),
        with one warning, and the work under way is done again there; refused there too,
        no more full detail is made (the images keep their thumbnails' detail)."""
        if not self.jobs:
            return
        spare = cache.spare_root()
        root = Path(next(iter(self.jobs.values())).entry).parents[1]
        for item in self._staged:  # half made in the folder left behind
            entry = next((j.entry for j in self.jobs.values() if j.item == item), None)
            if entry is not None:
                cache.drop_staging(Path(entry), self.fmt, self.chunk)
        self._staged.clear()
        self._stale.update(self._running)
        if root == spare:
            log.warning("the temporary cache %s stopped taking files too (%s): no more full "
                        "detail is made", spare, exc)
            self._dead.update(j.item for j in self.jobs.values())
            self.jobs.clear()
            return
        warn_uncached(root, exc, f"(full detail goes to a temporary cache in {spare}, "
                                 f"removed at exit)")
        self.jobs = {key: replace(j, entry=str(spare / Path(j.entry).parent.name /
                                               Path(j.entry).name))
                     for key, j in self.jobs.items()}

    def take_failures(self) -> list[tuple[str, str]]:
        out, self._failed = self._failed, []
        return out

    def close(self) -> None:
        """End the pool: queued jobs are dropped, running ones finish (their files are whole).
        The staged pixels of images not finished are removed: uncompressed, they were 4.4 GB
        for two large PNGs left on disk after a normal exit; a later run stages them again."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        entries = {j.item: j.entry for j in self.jobs.values()}
        for item in self._staged:
            if item in entries:
                cache.drop_staging(Path(entries[item]), self.fmt, self.chunk)
        self._staged.clear()
        self._running.clear()
        self._ready.clear()
        if self._work is not None:
            self._work.job.release()
            self._work = None
        if self._gpu is not None:
            self._gpu.release()
            self._gpu = None
