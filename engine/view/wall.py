"""`ImageWall` and `ImageView`: the user's images as a scene, for any host.

`ImageWall(paths)` finds the images (folders, globs, files), reads what their cached
thumbnails and headers say and lays them out; calling it with (device, provider, options)
builds the scene, so it is a scene factory for `run_scene`, `FrameLoop.embedded` and the
hosts in engine/hosts. An image whose thumbnail is not cached yet is drawn at once as a
placeholder (engine.view.placeholder: a box of its aspect in its mean colour), so the first
frame of a cold folder waits for no decode. While the scene runs, the background workers
(engine.view.encoder) make what the screen shows first (engine.view.priority): embedded EXIF
thumbnails and thumbnails, which replace the placeholders, then full detail, each chunk
replacing its part of the thumbnail as soon as it is written. `make_thumbnails()` makes
the missing thumbnails at once instead (a cache warmed before a run). A wall whose
thumbnails are cached but whose atlas is not draws them as placeholders in its first frame,
from their files in the next frames, and makes its atlas after the first frame
(engine.view.atlas_later).

Each image is one or more quads edge to edge: an image larger than `chunk` texels on a side
(4096, or the driver's GL_MAX_TEXTURE_SIZE if smaller) is cut into a grid of chunk
textures, each with its own mip chain, so any image streams by whole levels. Until a chunk's
own texture exists, its quad samples its part of the image's thumbnail (a UV transform), so
a zoom onto an image not encoded yet shows its best available level at once.

Photographs are shown as they are: no light falls on them (the sun is off, ambient is 1)
and the output is not tone mapped, so a pixel comes out as its file says.

`pick(ndc)` answers which image and which of its pixels is under the cursor; `fit_all()`,
`zoom_to(i)` and `full_size(i)` move the camera. `ImageView(path)` is the same for one image
(a deep-zoom view: larger thumbnail, starts fitted to it).
"""
from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from pyglm import glm

from ..app.loop import FrameContext, FrameHook
from ..diagnostics.live import process_age_s
from ..errors import TextureFormatError, UsageError
from ..gl.bc_encode import GpuBlockEncoder
from ..gl.device import Device
from ..render.camera import Camera
from ..render.material import Material
from ..render.mesh import Mesh, quad
from ..render.scene import Scene
from ..streaming.contract import NO_TEXTURE, TextureProvider
from ..textures.durable import refused, warn_uncached
from ..textures.progress import Progress
from . import atlas as atlas_
from .atlas_later import AtlasLater
from . import cache
from .browse import Browser
from .decode import MAX_PIXELS
from .discover import TEXTURE_SUFFIXES, discover, special_kind
from .encoder import DetailEncoder, Job, default_workers, process_pool
from .placeholder import GREY, Placeholder, header_placeholder, placeholder_or_problem
from .priority import EMBEDDED, THUMB, ViewRect, fill_order
from .layout import Rect, bounds, chunk_grid, grid, justified_rows
from .navigator import Navigator
from .settle import DetailClock

log = logging.getLogger(__name__)

LAYOUTS = ("rows", "grid")
ORDERS = ("path", "given")
FORMATS = ("bc1", "bc7")
ENCODERS = ("cpu", "gpu")
#: Thumbnail edge of a single image's deep-zoom view (a wall's is cache.THUMB_EDGE).
VIEW_THUMB_EDGE = 1024
#: Walls of at least this many thumbnails draw them from atlas pages (engine.view.atlas).
ATLAS_MIN = 16
#: Placeholders from which a cold start reads the headers over a pool of every core: one
#: header costs ~0.3 ms of Python on one core, a pool's start a few tenths of a second.
PARALLEL_PLACEHOLDERS = 4096
#: Cached thumbnails a frame shows in place of their placeholders (while the atlas is still
#: to make): each is a file checked and a texture registered on the render thread.
CACHED_PER_FRAME = 256


@dataclass
class Chunk:
    """One full-detail texture of an image: its pixel box, its world rectangle, its quad's
    material, and whether its own texture is registered yet."""

    k: int
    box: tuple[int, int, int, int]
    rect: Rect
    material: Material | None = None
    ready: bool = False


@dataclass
class Item:
    """One image on the wall."""

    index: int
    source: Path
    width: int
    height: int
    entry: Path | None  # cache folder; None for a KTX2/DDS file shown as it is
    rect: Rect = field(default_factory=lambda: Rect(0, 0, 1, 1))
    chunks: list[Chunk] = field(default_factory=list)
    #: what is drawn until its thumbnail is shown; None once it is (or was cached)
    placeholder: Placeholder | None = None

    @property
    def aspect(self) -> float:
        return self.width / self.height


@dataclass(frozen=True)
class Pick:
    """What is under a point of the screen: image number, its file and the pixel (x, y),
    in the upright image's pixels from its top-left corner."""

    index: int
    path: Path
    x: int
    y: int


def _thumb_jobs(wall: ImageWall, pending: list[tuple[int, Path, Path]]) -> dict[int, Any]:
    """Run the missing thumbnails (index, source, entry) over a pool; index -> result."""
    out: dict[int, Any] = {}
    if not pending:
        return out
    workers = wall.workers
    with Progress(len(pending), "thumbnails", enabled=wall.progress) as bar:
        if workers <= 1 or len(pending) < 4:
            for i, src, entry in pending:
                try:
                    out[i] = cache.make_thumbnail(str(src), str(entry), wall.thumb_edge,
                                                  wall.format, wall.max_pixels)
                except OSError as exc:
                    out[i] = _refused(exc)
                bar.advance(1, src.name)
            return out
        with process_pool(min(workers, len(pending))) as pool:
            futures = {pool.submit(cache.make_thumbnail, str(src), str(entry),
                                   wall.thumb_edge, wall.format, wall.max_pixels): (i, src)
                       for i, src, entry in pending}
            for fut, (i, src) in futures.items():
                try:
                    out[i] = fut.result()
                except OSError as exc:
                    out[i] = _refused(exc)
                bar.advance(1, src.name)
    return out


def _refused(exc: OSError) -> OSError:
    """A thumbnail's write the cache folder refused (full, read-only): the caller makes it
    again in the spare folder; any other error is raised."""
    if not refused(exc):
        raise exc
    return exc


class ImageWall:
    """The user's images as a zoomable wall (module docstring). CPU work only until called:

        wall = ImageWall(["photos/"])
        run_scene(wall, headless=False, provider="streaming", on_frame=wall.hooks())

    `layout`: "rows" (justified rows: aspect kept, nothing cropped) or "grid" (equal cells);
    `order`: "path" (sorted by file path) or "given" (as the paths and folder walks give
    them); `format`: full-detail BCn, "bc1" (8 bits a texel, fastest to encode) or "bc7"
    (16 bits a texel, better colour); `workers`: decoder and encoder processes (default: every
    core); `encoder`: where full detail's blocks are made, "cpu" (the workers) or "gpu"
    (compute shaders on the render thread, a few ms a frame; the workers decode and write;
    `python -m lab bench encode` says which is faster on a machine); `detail`: False
    keeps the thumbnails only; `wait_detail`: each frame waits for the full detail of what it
    shows (reproducible screenshots); `max_pixels`: the largest image read. Files that
    cannot be read are in `problems` (path, reason), logged once, skipped. Walls of
    `ATLAS_MIN` images or more draw their thumbnails from atlas pages (`atlas`)."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]], *, layout: str = "rows",
                 order: str = "path", format: str = "bc1", thumb_edge: int = cache.THUMB_EDGE,
                 chunk: int = cache.CHUNK, workers: int | None = None, detail: bool = True,
                 wait_detail: bool = False, max_pixels: int = MAX_PIXELS,
                 progress: bool | None = None, cache_dir: Path | None = None,
                 encoder: str = "cpu") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        if encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
        self.encoder = encoder
        if chunk < 4 or chunk % 4:
            raise ValueError(f"chunk must be a multiple of 4 texels, got {chunk}")
        self.layout, self.format, self.thumb_edge = layout, format, int(thumb_edge)
        self.chunk, self.detail, self.wait_detail = int(chunk), detail, wait_detail
        self.max_pixels, self.progress = int(max_pixels), progress
        self.workers = max(1, workers) if workers is not None else default_workers(os.cpu_count())
        self.cache_dir = cache_dir
        found = discover([os.fspath(p) for p in paths])
        files = sorted(found.files, key=lambda p: str(p)) if order == "path" else found.files
        self.problems: list[tuple[str, str]] = list(found.problems)
        self.items: list[Item] = []
        self._root = cache.writable_root(self.cache_dir or cache.view_root())
        self._load(files, found.resolved)
        # Temporary files a killed run left beside entries it had finished (a worker killed
        # mid-write of a second file): swept after the first frame, joined at `release`.
        self._sweeper = threading.Thread(
            target=cache.sweep_entries, args=([it.entry for it in self.items if it.entry],),
            name="view-cache-sweep", daemon=True)
        for what, why in self.problems:
            log.warning("skipped %s: %s", what, why)
        if not self.items:  # what the user named holds nothing to show: theirs to fix
            named = ", ".join(os.fspath(p) for p in paths) or "(nothing)"
            why = f" ({self.problems[0][1]})" if len(self.problems) == 1 else ""
            raise UsageError(f"{named}: no image could be read{why}")
        self.navigator = Navigator.fitting(self._lay_out())
        #: the run's first complete frame (engine.view.settle), made anew by each build
        self.detail_clock = DetailClock()
        #: keys, double click and title in a window (engine.view.browse)
        self.browser = Browser(self)

    # ------------------------------------------------------------------ CPU side
    def _lay_out(self) -> Rect:
        """Place the items (`layout`); the rectangle around them all."""
        aspects = [it.aspect for it in self.items]
        rects = justified_rows(aspects) if self.layout == "rows" else grid(aspects)
        for it, r in zip(self.items, rects):
            it.rect = r
        return bounds(rects)

    def _sketch(self, slots: list[Item | None], todo: list[tuple[int, Path, Path]]) -> None:
        """Images (index, path, entry) as placeholders until their thumbnails are made, into
        `slots`; None (and a problem) where a header cannot be read. A JPEG without an
        embedded thumbnail is read here from its markers; the rest through Pillow, many
        (`PARALLEL_PLACEHOLDERS`) over a pool of every core."""
        quick = [header_placeholder(path, self.max_pixels) for _, path, _ in todo]
        rest = [str(path) for (_, path, _), ph in zip(todo, quick) if ph is None]
        if self.workers > 1 and len(rest) >= PARALLEL_PLACEHOLDERS:
            pool = process_pool(min(self.workers, -(-len(rest) // 256)))
            try:
                read = list(pool.map(placeholder_or_problem, rest,
                                     [self.max_pixels] * len(rest), chunksize=256))
            finally:  # the idle workers exit on their own; waiting for them took ~1 s
                pool.shutdown(wait=False, cancel_futures=True)
        else:
            read = [placeholder_or_problem(p, self.max_pixels) for p in rest]
        got = iter(read)
        for (i, path, entry), ph in zip(todo, quick, strict=True):
            ph = ph if ph is not None else next(got)
            if isinstance(ph, str):
                self.problems.append((str(path), ph))
                slots[i] = None
            else:
                slots[i] = Item(i, path, ph.width, ph.height, entry, placeholder=ph)

    def _load(self, files: list[Path], resolved: dict[Path, Path]) -> None:
        root = self._root
        index = cache.Index(root)
        slots: list[Item | None] = []
        stats: dict[int, tuple[str, os.stat_result]] = {}
        trusted: list[int] = []  # the index says their thumbnails were made
        todo: list[tuple[int, Path, Path]] = []  # placeholders to read
        for i, path in enumerate(files):
            kind = special_kind(path) if path.suffix.lower() in TEXTURE_SUFFIXES else None
            if kind is not None:  # never opened: a FIFO would wait for a writer forever
                self.problems.append((str(path), f"{kind}, not a regular file: skipped"))
                slots.append(None)
                continue
            if path.suffix.lower() in TEXTURE_SUFFIXES:
                from ..textures.reader import open_texture

                try:
                    tex = open_texture(path)
                except TextureFormatError as exc:
                    self.problems.append((str(path), exc.problem))
                    slots.append(None)
                    continue
                slots.append(Item(i, path, tex.width, tex.height, None))
                continue
            key = os.path.abspath(path)
            try:
                st = os.stat(path)
                if not stat.S_ISREG(st.st_mode):
                    self.problems.append((str(path), f"{special_kind(path)}, not a regular "
                                                     f"file: skipped"))
                    slots.append(None)
                    continue
                known = index.lookup(key, st)
                entry, meta = known if known is not None else \
                    (cache.entry_dir(path, root, st, resolved.get(path)), None)
            except OSError as exc:
                self.problems.append((str(path), f"cannot read: {exc.strerror or exc}"))
                slots.append(None)
                continue
            stats[i] = key, st
            if known is not None:
                trusted.append(i)
                slots.append(Item(i, path, meta.width, meta.height, entry))
                continue
            meta = cache.read_meta(entry)
            if meta is not None and cache.usable(cache.thumb_path(entry, self.thumb_edge)):
                slots.append(Item(i, path, meta.width, meta.height, entry))
            else:
                slots.append(None)
                todo.append((i, path, entry))
        self._sketch(slots, todo)
        self._settle(index, slots, stats)
        # Thumbnails the index knows are looked for only where the atlas does not hold them
        # (a cache folder cleaned by hand): a warm start of a wall stats no thumbnail.
        # Where the atlas is still to make, a thumbnail is only looked for here (a stat) and
        # checked when it is shown (`_show_cached`): a second run stats each once.
        covered = set()
        if self.atlas is not None:
            covered = {id(it) for it, slot in zip(self._thumbed(), self.atlas.slots) if slot}
        present = os.path.isfile if self._atlas_later is not None else cache.usable
        lost = [i for i in trusted if slots[i] is not None and id(slots[i]) not in covered
                and not present(cache.thumb_path(slots[i].entry, self.thumb_edge))]
        if lost:
            self._sketch(slots, [(i, files[i], slots[i].entry)  # type: ignore[union-attr]
                                 for i in lost])
            self._settle(index, slots, stats)
        # Drawn as placeholders until shown from their files (`_show_cached`).
        self._cached = self._thumbed() if self._atlas_later is not None else []
        for it in self._cached:
            it.placeholder = Placeholder(it.width, it.height, GREY, False, cached=True)

    def _thumbed(self) -> list[Item]:
        """The items drawn from cached thumbnails: those an atlas holds, in order."""
        return [it for it in self.items if it.entry is not None and it.placeholder is None]

    def _settle(self, index: cache.Index, slots: list[Item | None],
                stats: dict[int, tuple[str, os.stat_result]]) -> None:
        """Remember every image in the index, number the items and find (or make) the
        atlas of their thumbnails."""
        for i, it in enumerate(slots):
            if it is not None and it.entry is not None:
                index.remember(*stats[i], it.entry, cache.Meta(it.width, it.height))
        index.save()
        self.items = [it for it in slots if it is not None]
        for n, it in enumerate(self.items):
            it.index = n
        self.atlas = self._atlas(self._root, now=False)

    def make_thumbnails(self) -> None:
        """Make every thumbnail not cached yet, now, in a pool, and the wall's atlas: a cache
        warmed before a run, whose first frame has no placeholders. An image that cannot be
        decoded keeps its placeholder and is in `problems`."""
        for it in self._cached:
            if it.placeholder is not None and it.placeholder.cached:
                it.placeholder = None
        self._cached = []
        pending = [(it.index, it.source, it.entry) for it in self.items
                   if it.placeholder is not None]
        results = _thumb_jobs(self, pending)  # type: ignore[arg-type]
        spare = cache.spare_root()
        again = [(i, src, spare / entry.parent.name / entry.name)
                 for i, src, entry in pending if isinstance(results[i], OSError)]
        if again and self._root != spare:  # the cache folder stopped taking files
            warn_uncached(self._root, results[again[0][0]],
                          f"(a temporary cache in {spare}, removed at exit)")
            self._root = spare
            results.update(_thumb_jobs(self, again))
            for i, _, entry in again:
                self.items[i].entry = entry
        for i, result in results.items():
            if isinstance(result, OSError):  # refused by the spare folder too
                result = cache.Failed(str(self.items[i].source), f"not cached: {result}")
            if isinstance(result, cache.Failed):
                self.problems.append((result.path, result.problem))
            else:
                self.items[i].placeholder = None
        if pending or self._atlas_later is not None:
            self.atlas = self._atlas(self._root, now=True)

    def _atlas(self, root: Path, now: bool) -> atlas_.Atlas | None:
        """The cached thumbnails of a wall of many images in a few shared pages
        (engine.view.atlas), made once and kept in the cache; None for a few images.
        Placeholders are not in it: their thumbnails come during the run, each its own
        texture, and are in the atlas of the next run. One not cached yet is made `now`,
        else after the first frame (`_atlas_later`, engine.view.atlas_later)."""
        self._atlas_later = None
        entries = [it.entry for it in self._thumbed()]
        if len(entries) < ATLAS_MIN:
            return None
        # keyed by the cache folders' names: each names its source's path, size and time
        folder = atlas_.atlas_dir(root, [e.name for e in entries], self.thumb_edge,
                                  atlas_.PAGE)
        found = atlas_.load(folder, len(entries))
        if found is not None:
            return found
        thumbs = [cache.thumb_path(e, self.thumb_edge) for e in entries]
        if not now:
            self._atlas_later = AtlasLater(folder, thumbs, self.thumb_edge, atlas_.PAGE,
                                           self.workers)
            return None
        try:
            if self.workers <= 1 or len(entries) <= 2 * ATLAS_MIN:
                return atlas_.build(folder, thumbs, self.thumb_edge, atlas_.PAGE)
            with process_pool(self.workers) as pool:
                return atlas_.build(folder, thumbs, self.thumb_edge, atlas_.PAGE, pool)
        except OSError as exc:
            log.warning("thumbnail atlas not made (%s): one texture per thumbnail", exc)
            return None

    # ------------------------------------------------------------------ scene
    def __call__(self, device: Device, provider: TextureProvider,
                 options: Mapping[str, Any]) -> Scene:
        return self.build(device, provider, options)

    def build(self, device: Device, provider: TextureProvider,
              options: Mapping[str, Any] | None = None) -> Scene:
        """The scene: one quad per chunk of every image, thumbnails registered at once."""
        chunk = min(self.chunk, device.caps.max_texture_size) // 4 * 4
        self.detail_clock = DetailClock()
        scene = ViewScene(device)
        scene.sweeper = self._sweeper
        try:
            mesh = scene.add_mesh(Mesh(device, quad(1.0, 1.0), label="view-image"))
            thumb_ids, thumb_uvs = self._register_thumbnails(device, provider)
            ready: list[tuple[str, Path]] = []
            ready_chunks: list[tuple[Item, Chunk, bool]] = []
            jobs: list[Job] = []
            for it, tid, base in zip(self.items, thumb_ids, thumb_uvs):
                self._place(it, chunk)
                # several chunks: staged by one decode, unless each reads its own tiles
                staged = len(it.chunks) > 1 and self.detail and it.entry is not None and \
                    not cache.reads_by_tiles(it.source)
                ph = it.placeholder
                if ph is not None and not ph.cached:  # its colour alone until its picture
                    jobs += [Job(it.index, k, str(it.source), str(it.entry),
                                 (0, 0, it.width, it.height), False)
                             for k in ((EMBEDDED, THUMB) if ph.embedded else (THUMB,))]
                for c in it.chunks:
                    c.material = Material(f"{it.source.name}#{c.k}", albedo=tid, roughness=1.0)
                    if it.entry is None:
                        c.ready = True
                    else:
                        if ph is not None:
                            c.material.albedo_factor = ph.albedo_factor()
                        else:
                            c.material.uv_transform = _compose(base, _sub_rect(
                                c.box, it.width, it.height))
                        name = f"{it.entry}/{self.format}-{chunk}/c{c.k}.ktx2"  # chunk_path
                        if os.path.isfile(name):  # as a string: one stat per image here
                            path = Path(name)
                            ready.append((f"view:{path}", path))
                            ready_chunks.append((it, c, staged))
                        elif self.detail:
                            jobs.append(Job(it.index, c.k, str(it.source), str(it.entry),
                                            c.box, staged))
                    scene.materials.append(c.material)
                    r = c.rect
                    # z scaled like the longer side: the quad is flat, and the streamer
                    # takes an object's texel density from its largest axis scale
                    model = glm.translate(glm.vec3(*r.center, 0.0)) * \
                        glm.scale(glm.vec3(r.width, r.height, max(r.width, r.height)))
                    scene.add(mesh, c.material, model)
            for (it, c, staged), tid in zip(ready_chunks, cache.register_cached(provider,
                                                                                 ready)):
                if tid is not None:
                    _show(c, tid)
                elif self.detail:  # a damaged cached chunk: made again
                    jobs.append(Job(it.index, c.k, str(it.source), str(it.entry), c.box,
                                    staged))
            scene.sun.intensity = 0.0
            scene.ambient = (1.0, 1.0, 1.0)
            scene.tonemap = False
            scene.clear_color = (0.08, 0.08, 0.09)
            scene.camera = Camera(fovy_deg=self.navigator.fovy_deg)
            scene.navigator = self.navigator
            scene.controls = self.browser
            scene.provider = provider
            if jobs or any(it.placeholder is not None for it in self.items):
                scene.encoder = DetailEncoder(jobs, self.format, chunk, self.workers,
                                              self.max_pixels, gpu=self._gpu_encoder(device),
                                              thumb_edge=self.thumb_edge)
            scene.on_update.append(lambda sc, t: self._update(sc))
            scene.atlas_later = self._atlas_later
            self.navigator.apply(scene.camera)
        except BaseException:
            scene.release()
            raise
        return scene

    def _register_thumbnails(self, device: Device, provider: TextureProvider
                             ) -> tuple[list[int], list[UvTransform]]:
        """Each image's first texture id and the UV transform onto its thumbnail: an atlas
        page and its slot where the wall has an atlas (and the driver takes its pages), else
        the image's own thumbnail (or its KTX2/DDS file); NO_TEXTURE for a placeholder."""
        atlas = self.atlas if self.atlas is not None and \
            self.atlas.page_edge <= device.caps.max_texture_size else None
        slots = iter(atlas.slots) if atlas is not None else None
        names: list[tuple[str, Path]] = []
        where: list[tuple[int, UvTransform]] = []  # (index in names, UV transform)
        pages: dict[int, int] = {}
        for it in self.items:
            if it.placeholder is not None:
                where.append((-1, IDENTITY))
                continue
            slot = next(slots) if slots is not None and it.entry is not None else None
            if slot is not None:
                assert atlas is not None
                if slot.page not in pages:
                    pages[slot.page] = len(names)
                    names.append((f"view-atlas:{atlas.pages[slot.page]}",
                                  atlas.pages[slot.page]))
                where.append((pages[slot.page], slot.uv(atlas.page_edge)))
                continue
            names.append((f"view:{it.source}", it.source if it.entry is None else
                          cache.thumb_path(it.entry, self.thumb_edge)))
            where.append((len(names) - 1, IDENTITY))
        ids = provider.register_many(names)
        return [ids[n] if n >= 0 else NO_TEXTURE for n, _ in where], [uv for _, uv in where]

    def _gpu_encoder(self, device: Device) -> GpuBlockEncoder | None:
        """The GPU encoder `encoder="gpu"` asks for; None (the workers encode) when this
        context has no compute shaders."""
        if self.encoder != "gpu":
            return None
        try:
            return GpuBlockEncoder(device)
        except UsageError as exc:
            log.warning("full detail encoded on the CPU: %s", exc)
            return None

    def _place(self, it: Item, chunk: int) -> None:
        """Cut the image's rectangle into its chunks' rectangles (edge to edge)."""
        if it.entry is None or (it.width <= chunk and it.height <= chunk):
            it.chunks = [Chunk(0, (0, 0, it.width, it.height), it.rect)]  # one: the image's
            return
        boxes = chunk_grid(it.width, it.height, chunk)
        sx, sy = it.rect.width / it.width, it.rect.height / it.height
        it.chunks = [Chunk(k, b, Rect(it.rect.x0 + b[0] * sx, it.rect.y1 - b[3] * sy,
                                      it.rect.x0 + b[2] * sx, it.rect.y1 - b[1] * sy))
                     for k, b in enumerate(boxes)]

    def _update(self, scene: ViewScene) -> None:
        """Per frame, on the render thread: pose the camera, show finished chunks, hand the
        encoder this frame's order of what to make next."""
        self.navigator.apply(scene.camera)
        scene.updates += 1
        if scene.updates > 1:  # after the first frame: the cache sweep, the next run's atlas
            _start_once(self._sweeper)
            later = self._atlas_later
            if later is not None and not later.started:
                later.start()
        enc = scene.encoder
        if enc is None or (scene.updates == 1 and not self.wait_detail):
            return  # the workers start after the first frame, unless it waits for them
        view = self.navigator.view_rect()
        if scene.updates > 1:  # and the cached thumbnails
            self._show_cached(scene, enc, view)
        by_key: dict[tuple[int, int], Chunk | Item] = {
            (it.index, c.k): c for it in self.items for c in it.chunks if not c.ready}
        by_key.update(((it.index, k), it) for it in self.items if it.placeholder is not None
                      for k in (EMBEDDED, THUMB))
        order = enc.order(by_key, view)
        if self.wait_detail:
            visible = [key for key, c in by_key.items() if view.overlaps(c.rect)]
            done = enc.wait_for(visible, order)
        else:
            done = enc.pump(order)
        entries = []
        shown = []
        thumbs = {key[0] for key, _ in done if key[1] == THUMB}
        for key, path in done:
            part = by_key.get(key)
            if part is not None and not (key[1] == EMBEDDED and key[0] in thumbs):
                entries.append((f"view:{path}", Path(path)))
                shown.append((key[1], part))
        for (k, part), tid in zip(shown, scene.provider.register_many(entries)):
            if isinstance(part, Chunk):
                _show(part, tid)
            elif part.placeholder is not None:  # an embedded one after its thumbnail: late
                _first_picture(part, tid, final=k == THUMB)
        for path, problem in enc.take_failures():
            self.problems.append((path, problem))
            log.warning("full detail of %s failed: %s", path, problem)

    def _show_cached(self, scene: ViewScene, enc: DetailEncoder, view: ViewRect) -> None:
        """Show up to `CACHED_PER_FRAME` placeholders whose thumbnails are cached, from those
        files, the screen's first; a file found damaged is made again by the workers."""
        waiting = self._cached = _still_cached(self._cached)
        if not waiting:
            return
        order = fill_order([THUMB] * len(waiting), [it.rect for it in waiting], view)
        batch = [waiting[i] for i in order[:CACHED_PER_FRAME]]
        files = [cache.thumb_path(it.entry, self.thumb_edge)  # type: ignore[arg-type]
                 for it in batch]
        ids = cache.register_cached(scene.provider, [(f"view:{f}", f) for f in files])
        for it, tid in zip(batch, ids):
            if tid is not None:
                _first_picture(it, tid, final=True)
            else:  # drawn as its placeholder until the workers make it again
                it.placeholder = replace(it.placeholder, cached=False)  # type: ignore[arg-type]
                enc.jobs[(it.index, THUMB)] = Job(it.index, THUMB, str(it.source),
                                                  str(it.entry), (0, 0, it.width, it.height),
                                                  False)

    # ------------------------------------------------------------------ queries, camera
    def pick(self, ndc: tuple[float, float]) -> Pick | None:
        """The image and pixel under a screen point in normalised device coordinates
        (-1..1, y up); None over the background."""
        wx, wy = self.navigator.world_at(ndc)
        for it in self.items:
            r = it.rect
            if r.contains(wx, wy):
                px = min(it.width - 1, int((wx - r.x0) / r.width * it.width))
                py = min(it.height - 1, int((r.y1 - wy) / r.height * it.height))
                return Pick(it.index, it.source, px, py)
        return None

    def fit_all(self) -> None:
        self.navigator.fit(bounds([it.rect for it in self.items]))

    def zoom_to(self, index: int, fill: float = 0.95) -> None:
        """Frame image `index` (0-based) so it fills `fill` of the view: what `--zoom-to
        N` (1-based) and the window's Return do."""
        self.navigator.fit(self.items[index].rect, margin=1.0 / fill)

    def full_size(self, index: int) -> None:
        """Centre image `index` at one image pixel per screen pixel."""
        it = self.items[index]
        self.navigator.one_to_one(it.rect, it.height)

    def hooks(self, metrics: bool = False) -> list[FrameHook]:
        """Frame hooks for the run (the frame loop keeps the navigator in step with the
        output's size before each frame): record the detail still missing
        (`view_pending_chunks`), the images drawn as placeholders, their thumbnail not
        shown yet (`view_placeholders`), the fraction of on-screen chunks shown from their own
        texture (`view_visible_ready`) and whether the frame shows all its view will get
        (`settled`, which also lets a window stop redrawing; the first such frame goes to
        `detail_clock`), and whether detail off screen is still to encode
        (`work_pending`: a settled window then draws a frame now and then). `metrics`
        adds the streamer's screen-weighted coverage (`at_wanted_fraction`, ...: one
        residency query per texture a frame, for reports; a texture served by tiles, as
        atlas pages are, counts as resident there: `settled` does not)."""
        def hook(ctx: FrameContext) -> None:
            view = self.navigator.view_rect()
            chunks = [c for it in self.items for c in it.chunks]
            shown = [c for c in chunks if view.overlaps(c.rect)]
            enc = getattr(ctx.scene, "encoder", None)
            jobs = enc.jobs if enc is not None else {}  # a failed image's chunks leave it
            encoding = any((it.index, c.k) in jobs for it in self.items for c in it.chunks
                           if not c.ready and view.overlaps(c.rect)) or \
                any((it.index, THUMB) in jobs for it in self.items
                    if it.placeholder is not None and view.overlaps(it.rect)) \
                if jobs else False
            cached = self._cached = _still_cached(self._cached)
            encoding = encoding or any(view.overlaps(it.rect) for it in cached)
            ctx.record["view_pending_chunks"] = sum(1 for c in chunks if not c.ready)
            ctx.record["view_placeholders"] = sum(it.placeholder is not None
                                                  for it in self.items)
            ctx.record["view_visible_ready"] = (sum(1 for c in shown if c.ready) / len(shown)
                                                if shown else 1.0)
            ctx.record["view_images"] = len(self.items)
            ctx.record["caption"] = self.browser.caption(self.browser.current)  # the HUD's
            table = ctx.provider.resident_textures()  # a level fading in still changes
            fading = bool(np.any(np.asarray(table.min_lod) > np.asarray(table.finest) + 1e-3))
            ctx.record["settled"] = self.detail_clock.observe(
                ctx.frame, ctx.record, fading or encoding, process_age_s())
            # off-screen detail still to encode: a settled window still draws now and then,
            # each frame handing the encoder its next jobs
            ctx.record["work_pending"] = bool(jobs) or bool(cached)
            if enc is not None:  # what a GPU encode may take in the next frame
                budget = int(ctx.record.get("effective_budget_bytes",
                                            ctx.governor.budget_bytes))
                enc.gpu_headroom = max(0, budget - ctx.device.ledger.total)
            if metrics:
                from ..streaming.levels.metrics import measure_view

                fv = ctx.renderer.frame_view(ctx.scene, ctx.frame, ctx.time)
                count = int(fv.texture_ids.max(initial=-1)) + 1
                cov, _ = measure_view(fv, ctx.provider, count)
                ctx.record.update(cov.as_record())
        return [hook]


UvTransform = tuple[tuple[float, float, float], tuple[float, float, float]]
IDENTITY: UvTransform = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))


def _compose(outer: UvTransform, inner: UvTransform) -> UvTransform:
    """`inner` then `outer` (scale and offset per axis, as `_sub_rect` makes them)."""
    (a, _, c), (_, d, f) = outer
    (a2, _, c2), (_, d2, f2) = inner
    return ((a * a2, 0.0, a * c2 + c), (0.0, d * d2, d * f2 + f))


def _sub_rect(box: tuple[int, int, int, int], width: int, height: int) -> UvTransform:
    """UV transform that maps a quad's UV square onto the box's part of the whole image."""
    x0, y0, x1, y1 = box
    return ((float(x1 - x0) / width, 0.0, float(x0) / width),
            (0.0, float(y1 - y0) / height, float(y0) / height))


def _first_picture(it: Item, tid: int, final: bool) -> None:
    """Draw the chunks of `it` not encoded yet from texture `tid`, its embedded or (`final`)
    its own thumbnail, instead of its placeholder's colour."""
    for c in it.chunks:
        if not c.ready:
            assert c.material is not None
            c.material.albedo = tid
            c.material.albedo_factor = (1.0, 1.0, 1.0, 1.0)
            c.material.uv_transform = _sub_rect(c.box, it.width, it.height)
    if final:
        it.placeholder = None


def _show(c: Chunk, tid: int) -> None:
    assert c.material is not None
    c.material.albedo = tid
    c.material.albedo_factor = (1.0, 1.0, 1.0, 1.0)  # a placeholder's colour no more
    c.material.uv_transform = IDENTITY
    c.ready = True


class ViewScene(Scene):
    """The wall's scene: also ends the background encoder when the run releases it."""

    encoder: DetailEncoder | None = None
    provider: TextureProvider | None = None
    sweeper: threading.Thread | None = None  # the wall's cache sweep, joined on release
    #: the next run's atlas, made after the first frame: finished on release
    atlas_later: AtlasLater | None = None
    updates = 0  # frames updated so far

    def release(self) -> None:
        if self.encoder is not None:
            self.encoder.close()
            self.encoder = None
        if self.atlas_later is not None:
            self.atlas_later.wait()
            self.atlas_later = None
        if self.sweeper is not None:
            _start_once(self.sweeper)
            self.sweeper.join()
        super().release()


def _still_cached(items: list[Item]) -> list[Item]:
    """Of `items`, those still drawn as placeholders of a cached thumbnail."""
    return [it for it in items if it.placeholder is not None and it.placeholder.cached]


def _start_once(thread: threading.Thread) -> None:
    if thread.ident is None:
        thread.start()


class ImageView(ImageWall):
    """One image in a deep-zoom view: a larger thumbnail for the first frame, the camera fitted
    to the image, zoom down to its pixels. A scientific image (an OME-Zarr, OME-TIFF, slide,
    URL or `ChunkedSource`: `engine.science.readers.is_science_location`) is a
    `ScienceScene` instead, its raw values shown as `engine view` shows them, in any host;
    it takes `displays`, `sampling` and `encoding`."""

    def __new__(cls, path: Any, **kwargs: Any) -> Any:
        from ..science.readers import is_science_location

        if not is_science_location(path):
            return super().__new__(cls)
        from ..hosts.science import ScienceScene

        extra = sorted(set(kwargs) - {"displays", "sampling", "encoding"})
        if extra:
            raise UsageError(f"a scientific image takes displays=, sampling= and encoding=, "
                             f"not {extra}")
        return ScienceScene(path if not isinstance(path, os.PathLike) else os.fspath(path),
                            **kwargs)

    def __init__(self, path: str | os.PathLike[str], **kwargs: Any) -> None:
        kwargs.setdefault("thumb_edge", VIEW_THUMB_EDGE)
        super().__init__([path], **kwargs)
