"""The viewer's cache: thumbnails and full-detail textures of the user's images, made on
demand, kept under the engine's cache folder (`$ENGINE_CACHE`, else ~/.cache/engine) in
view/v<VERSION>/, so a second run starts from them at once.

One folder per source file, named by a hash of its resolved path, size, modification and
change times and inode (an edited file gets a new folder, so the cache never shows a stale
picture, even one replaced with the same size and modification time by `cp -p` or
`touch -r`: its change time and inode differ):
`meta.json` (the upright size), `thumb<N>.ktx2` (a BCn mip chain whose longer
edge is N), `embedded.ktx2` (a JPEG's EXIF thumbnail, shown until thumb<N> is made; a few
KB, kept, as the streamer may read it while it is shown) and `<format>-<chunk>/c<k>.ktx2`,
the full-detail chunk textures (the walls' thumbnail atlases live beside them, in atlas/:
engine.view.atlas). Every job here
is a top-level function of plain arguments, so a process pool (or any
`concurrent.futures.Executor`) runs it; each returns a value rather than raising for a bad
input, because an exception must cross a process boundary. Files are written to a temporary
name, flushed and renamed (engine.textures.durable), a job sweeps the temporary files killed
writers left in the folder it writes, and a job that fails removes the folder it made when it
is left empty.

A cache that heals. A cached texture that does not parse (cut short, zero-filled: what a
crash or a full disk makes) or whose bytes differ from their checksum (a CRC32 per level,
engine.textures.checksum) is a miss, never an error: `usable` and `register_cached`
remove it, say so once (a warning naming the file) and the caller makes it again. A cache
folder that cannot be written (read-only, no permission) is replaced by a temporary one for
the run (`writable_root`), with one warning naming $ENGINE_CACHE.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TextureFormatError
from ..textures.bake import choose_format
from ..textures.cachedir import cache_root
from ..textures.durable import sweep_temps, write_atomic
from ..textures.encode import encode_image
from ..textures.identity import source_identity
from ..textures.ktx2_write import write_ktx2
from ..textures import checksum, strips, tiff_tiles
from ..textures.mipgen import generate_mips
from ..textures.reader import open_texture
from .backdrop import over_checkerboard
from ..textures.source_image import open_named
from .decode import MAX_PIXELS, decode_upright, embedded_thumbnail, probe
from .layout import chunk_grid

log = logging.getLogger(__name__)

VERSION = 3  # 3: a checksum per level (engine.textures.checksum)
#: Longer edge of the thumbnails the first frame of a wall is drawn from.
THUMB_EDGE = 256
#: Images above this many pixels get their thumbnail through libvips where it is installed
#: (shrink on load, a strip at a time); smaller ones through Pillow's draft and reduce.
STRIP_PIXELS = 64 << 20
#: Longest edge of one full-detail chunk texture (also capped by the driver's maximum).
CHUNK = 4096


@dataclass(frozen=True)
class Meta:
    """What the cache knows of a source: its upright size in pixels."""

    width: int
    height: int


@dataclass(frozen=True)
class Failed:
    path: str
    problem: str


def view_root() -> Path:
    return cache_root() / "view" / f"v{VERSION}"


def entry_dir(source: Path, root: Path | None = None, st: os.stat_result | None = None,
              resolved: Path | None = None) -> Path:
    """The cache folder of `source` (not made here); `st`: its stat and `resolved`: its
    resolved path, when already known (a folder walk resolves each file once)."""
    st = st or source.stat()
    # os.fsencode: a name that is not UTF-8 (caf\xe9.jpg) hashes as the bytes it is
    ident = os.fsencode(resolved or source.resolve()) + f"\0{source_identity(st)}".encode()
    digest = hashlib.sha1(ident).hexdigest()
    return (root or view_root()) / digest[:2] / digest


class Index:
    """What earlier runs found, in one file of the cache root (`index.json`): per source
    (its absolute path as named) its identity (`source_identity`), cache folder and upright
    size. A warm start of a large folder then stats each file instead of resolving its
    path and reading its meta.json; a file whose size or time changed misses and takes the
    slow path (and so a new cache folder), and an index that cannot be read is empty."""

    NAME = "index.json"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows: dict[str, list] = {}
        self.dirty = False
        try:
            rows = json.loads((root / self.NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(rows, dict):
            self.rows = {k: v for k, v in rows.items()
                         if isinstance(v, list) and len(v) == 4 and isinstance(v[0], str)
                         and isinstance(v[1], str)}

    def lookup(self, key: str, st: os.stat_result) -> tuple[Path, Meta] | None:
        """(cache folder, upright size) of an unchanged source, else None."""
        row = self.rows.get(key)
        if row is None or row[0] != source_identity(st):
            return None
        digest = row[1]
        try:
            return Path(f"{self.root}/{digest[:2]}/{digest}"), Meta(int(row[2]), int(row[3]))
        except (TypeError, ValueError):
            return None

    def remember(self, key: str, st: os.stat_result, entry: Path, meta: Meta) -> None:
        if entry.parents[1] != self.root:  # made in the spare folder: gone next run
            return
        row = [source_identity(st), entry.name, meta.width, meta.height]
        if self.rows.get(key) != row:
            self.rows[key] = row
            self.dirty = True

    def save(self) -> None:
        """Write the index if it changed (atomically; the last of two runs wins, and a row
        either run lacks only sends that file down the slow path next time)."""
        if not self.dirty:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            write_atomic(self.root / self.NAME, json.dumps(self.rows).encode())
            self.dirty = False
        except OSError as exc:
            log.info("view index not written: %s", exc)


def thumb_path(entry: Path, edge: int) -> Path:
    return entry / f"thumb{edge}.ktx2"


def chunk_dir(entry: Path, fmt: str, chunk: int) -> Path:
    return entry / f"{fmt}-{chunk}"


def chunk_path(entry: Path, fmt: str, chunk: int, k: int) -> Path:
    return chunk_dir(entry, fmt, chunk) / f"c{k}.ktx2"


def read_meta(entry: Path) -> Meta | None:
    try:
        data = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
        return Meta(int(data["width"]), int(data["height"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


_spare: list[Path] = []


def spare_root() -> Path:
    """This run's temporary cache folder, made on first use and removed at exit: where the
    viewer caches once its cache folder cannot be written."""
    if not _spare:
        _spare.append(Path(tempfile.mkdtemp(prefix="engine-view-cache-")))
        atexit.register(shutil.rmtree, _spare[0], ignore_errors=True)
    return _spare[0]


def sweep_entries(entries: list[Path]) -> int:
    """`sweep_temps` in each entry folder and its chunk folders; how many files went. An
    entry that vanishes or cannot be listed meanwhile (made or removed by a writer) is
    passed over, not the end of the sweep."""
    removed = 0
    for entry in entries:
        try:
            folders = [entry, *(p for p in entry.iterdir() if p.is_dir())]
        except OSError:
            continue
        removed += sum(sweep_temps(folder) for folder in folders)
    return removed


def writable_root(root: Path) -> Path:
    """`root` when this process can make files in it; else (read-only, no permission) the
    `spare_root` and one warning naming $ENGINE_CACHE: the viewer runs without a cache
    rather than failing on its first thumbnail."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=root)
        os.close(fd)
        os.unlink(probe)
        sweep_temps(root)
        return root
    except OSError as exc:
        spare = spare_root()
        log.warning("the cache folder %s ($ENGINE_CACHE) cannot be written (%s): running "
                    "without a cache (a temporary one in %s, removed at exit)", root,
                    exc.strerror or exc, spare)
        return spare


def discard(path: Path | str, problem: str) -> None:
    """A damaged cached file: removed, with one warning, so that it is made again."""
    log.warning("cache: %s is damaged (%s); it is made again", path, problem)
    try:
        Path(path).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cache: %s could not be removed: %s", path, exc)


def intact(path: Path) -> bool:
    """The cached texture `path` parses and every level matches its checksum
    (engine.textures.checksum); a damaged one is `discard`ed and False returned."""
    try:
        checksum.verify(open_texture(path))
    except TextureFormatError as exc:
        discard(path, exc.problem)
        return False
    return True


def usable(path: Path) -> bool:
    """The cached texture `path` exists and is `intact`: False is a miss, made again by
    the caller."""
    return path.is_file() and intact(path)


def register_cached(provider: Any, entries: Sequence[tuple[str, Path]]) -> list[int | None]:
    """`provider.register_many(entries)` for cached files, one id per entry; a file that
    is not `intact` is `discard`ed and gets None (its caller makes it again) instead of
    failing the batch or drawing noise."""
    good = [i for i, (_, path) in enumerate(entries) if intact(path)]
    ids = provider.register_many([entries[i] for i in good]) if good else []
    out: list[int | None] = [None] * len(entries)
    for i, tid in zip(good, ids):
        out[i] = tid
    return out


def _remove_if_empty(folder: Path, stop: Path) -> None:
    """Remove `folder` and its parents up to (not including) `stop` while they are empty."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def encode_chain(rgba: np.ndarray, fmt: str, path: Path) -> int:
    """Mip chain of `rgba` encoded to `fmt` ("bc1" or "bc7", sRGB) and written as KTX2."""
    name = choose_format(fmt, True, rgba)
    levels = [encode_image(level, name) for level in generate_mips(rgba, colorspace="srgb")]
    h, w = rgba.shape[:2]
    return write_ktx2(path, name, w, h, levels, checksums=True)


def embedded_path(entry: Path) -> Path:
    return entry / "embedded.ktx2"


def make_embedded(source: str, entry: str, fmt: str, max_pixels: int = MAX_PIXELS
                  ) -> Meta | Failed:
    """Worker job: write the JPEG's embedded EXIF thumbnail, upright, as a texture the wall
    shows until the image's own thumbnail is decoded; the upright size."""
    folder = Path(entry)
    try:
        info = probe(source, max_pixels)
        with open_named(Path(source), max_pixels) as im:
            thumb = embedded_thumbnail(im, info.orientation)
    except TextureFormatError as exc:
        return Failed(source, exc.problem)
    if thumb is None:
        return Failed(source, "no embedded thumbnail of the image's aspect")
    rgba = np.asarray(thumb.convert("RGBA"), np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    encode_chain(rgba, fmt, embedded_path(folder))
    return Meta(info.width, info.height)


def make_thumbnail(source: str, entry: str, edge: int, fmt: str,
                   max_pixels: int = MAX_PIXELS) -> Meta | Failed:
    """Worker job: decode `source` small (draft/reduce), write its thumbnail and meta.json."""
    folder = Path(entry)
    try:
        info = probe(source, max_pixels)
        rgba = None
        if info.width * info.height > STRIP_PIXELS and info.orientation == 1 and \
                info.mode != "CMYK" and strips.available():
            try:
                rgba = strips.thumbnail(source, edge, max_pixels)
            except TextureFormatError as exc:
                log.info("%s: %s; decoding with Pillow", source, exc.problem)
        if rgba is None:
            rgba = decode_upright(source, edge, max_pixels=max_pixels)
        rgba = over_checkerboard(rgba, (info.width, info.height),
                                 scale=info.width / rgba.shape[1])
    except TextureFormatError as exc:
        return Failed(source, exc.problem)
    root = folder.parents[1]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        sweep_temps(folder)
        encode_chain(rgba, fmt, thumb_path(folder, edge))
        meta = Meta(info.width, info.height)
        write_atomic(folder / "meta.json", json.dumps(asdict(meta)).encode())
        return meta
    except BaseException:
        _remove_if_empty(folder, root)
        raise


def _strip_rows(source: str, max_pixels: int):
    """((h, w, 4), strip iterator) through libvips when it is installed and reads the file
    upright by strips; None: decode it whole with Pillow. CMYK goes through Pillow, which
    reads Adobe's inverted CMYK JPEGs as their writers meant."""
    if not strips.available():
        return None
    info = probe(source, max_pixels)
    if info.orientation != 1 or info.mode == "CMYK":
        return None
    try:
        w, h, it = strips.strips(source, max_pixels)
    except TextureFormatError as exc:
        log.info("%s: %s; decoding whole with Pillow", source, exc.problem)
        return None
    return (h, w, 4), it


def staging_dir(entry: Path, fmt: str, chunk: int) -> Path:
    return chunk_dir(entry, fmt, chunk) / "staging"


def _staged_chunk(entry: Path, fmt: str, chunk: int, k: int) -> Path:
    return staging_dir(entry, fmt, chunk) / f"c{k}.rgba"


def stage_upright(source: str, entry: str, fmt: str, chunk: int,
                  max_pixels: int = MAX_PIXELS) -> float | Failed:
    """Worker job for an image of several chunks: decode it upright once, by strips where
    libvips can (engine.textures.strips), into one uncompressed file per chunk (its rows
    appended strip by strip, transparency over the checkerboard), so this job holds a strip
    and each chunk job reads exactly its own chunk. Returns the CPU seconds spent."""
    start = time.process_time()
    folder = staging_dir(Path(entry), fmt, chunk)
    try:
        rows = _strip_rows(source, max_pixels)
        if rows is None:
            whole = decode_upright(source, max_pixels=max_pixels)
            shape = whole.shape
            rows = iter([(0, whole)])
        else:
            shape, rows = rows
    except TextureFormatError as exc:
        return Failed(source, exc.problem)
    h, w = shape[:2]
    boxes = chunk_grid(w, h, chunk)
    cols = -(-w // chunk)
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[int, Any] = {}
    try:
        for y, strip in rows:
            strip = over_checkerboard(strip, (w, h), origin=(0, y))
            n = strip.shape[0]
            r = y
            while r < y + n:  # a strip may straddle a chunk row
                band = r // chunk
                stop = min(y + n, (band + 1) * chunk)
                part = strip[r - y:stop - y]
                for c in range(cols):
                    k = band * cols + c
                    x0, _, x1, _ = boxes[k]
                    fh = files.get(k)
                    if fh is None:
                        fh = files[k] = open(_staged_chunk(Path(entry), fmt, chunk, k), "wb")
                    fh.write(np.ascontiguousarray(part[:, x0:x1]).tobytes())
                    if stop == boxes[k][3]:  # the chunk's last row: done with its file
                        fh.close()
                        del files[k]
                r = stop
    except TextureFormatError as exc:
        _drop_files(files, folder)
        return Failed(source, exc.problem)
    except BaseException:
        _drop_files(files, folder)
        raise
    return time.process_time() - start


def _drop_files(files: dict[int, Any], folder: Path) -> None:
    for fh in files.values():
        fh.close()
    shutil.rmtree(folder, ignore_errors=True)
    _remove_if_empty(folder.parent, folder.parents[1])


def encode_chunk(source: str, entry: str, fmt: str, chunk: int, k: int,
                 box: tuple[int, int, int, int], staged: bool,
                 max_pixels: int = MAX_PIXELS) -> float | Failed:
    """Worker job: write full-detail chunk `k` (pixel `box` of the upright image). A single-
    chunk image is decoded here, a tiled TIFF's chunk read from its tiles; a larger image is
    read from its staged chunk file, which is removed once the chunk is written. Returns the
    CPU seconds spent."""
    start = time.process_time()
    rgba = chunk_pixels(source, entry, fmt, chunk, k, box, staged, max_pixels)
    if isinstance(rgba, Failed):
        return rgba
    _store_chunk(Path(entry), fmt, chunk, k, staged,
                 lambda path: encode_chain(rgba, fmt, path))
    return time.process_time() - start


def _store_chunk(folder: Path, fmt: str, chunk: int, k: int, staged: bool,
                 write: Any) -> None:
    """Write chunk `k` through `write(path)`; a failed write leaves no empty folder, a
    written one its staged pixels removed."""
    out = chunk_dir(folder, fmt, chunk)
    out.mkdir(parents=True, exist_ok=True)
    sweep_temps(out)
    try:
        write(chunk_path(folder, fmt, chunk, k))
    except BaseException:
        _remove_if_empty(out, folder)
        raise
    if staged:
        _staged_chunk(folder, fmt, chunk, k).unlink(missing_ok=True)


def chunk_pixels(source: str, entry: str, fmt: str, chunk: int, k: int,
                 box: tuple[int, int, int, int], staged: bool,
                 max_pixels: int = MAX_PIXELS) -> np.ndarray | Failed:
    """Worker job: chunk `k`'s upright RGBA8 pixels, transparency over the checkerboard
    (engine.view.backdrop): read from its staged chunk file, from
    the tiles under its box (a tiled TIFF: `reads_by_tiles`), or decoded (a single-chunk
    image); also for an encoder outside the worker (the GPU's)."""
    x0, y0, x1, y1 = box
    if staged:
        raw = _staged_chunk(Path(entry), fmt, chunk, k)
        try:
            return np.fromfile(raw, np.uint8).reshape(y1 - y0, x1 - x0, 4)
        except (OSError, ValueError) as exc:  # removed or cut short behind our back
            return Failed(source, f"staged chunk {k} unreadable: {exc}")
    try:
        tiled = tiff_tiles.open_tiled(source)
        if tiled is not None:
            probe(source, max_pixels)  # the limit on what is read, as for a whole decode
            return over_checkerboard(tiff_tiles.read_region(tiled, box),
                                     (tiled.width, tiled.height), origin=(x0, y0))
        whole = decode_upright(source, max_pixels=max_pixels)
        return over_checkerboard(whole, (whole.shape[1], whole.shape[0]))
    except TextureFormatError as exc:
        return Failed(source, exc.problem)


def reads_by_tiles(source: str | Path) -> bool:
    """Whether each chunk of `source` is read from the tiles under it (a tiled TIFF), so
    its image needs no staging decode before its first chunk."""
    return tiff_tiles.open_tiled(source) is not None


def write_chunk(entry: str, fmt: str, chunk: int, k: int, format_name: str, width: int,
                height: int, levels: list[bytes], staged: bool) -> float:
    """Worker job: write chunk `k`'s encoded mip chain (as `encode_chunk` would have), and
    remove its staged chunk file. Returns the CPU seconds spent."""
    start = time.process_time()
    _store_chunk(Path(entry), fmt, chunk, k, staged,
                 lambda path: write_ktx2(path, format_name, width, height, levels,
                                            checksums=True))
    return time.process_time() - start


def drop_staging(entry: Path, fmt: str, chunk: int) -> None:
    """Remove the staging folder once every chunk is written."""
    shutil.rmtree(staging_dir(entry, fmt, chunk), ignore_errors=True)


