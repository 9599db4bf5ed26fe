"""Thumbnail atlases: a wall's thumbnails copied into a few large textures.

Why: a wall of thousands of images drawn from one texture per thumbnail pays for each
texture at start (a file opened, a GL texture made, its tail uploaded) and in every frame;
pages holding a grid of thumbnail cells pay that once per page. The thumbnails are BCn
chains already, so a page level is made by copying each thumbnail's blocks into its cell,
with no decode or encode, while a cell is at least one block; the page's smaller levels are
filtered down from the last level so made (decoded and encoded again: a few texels per
thumbnail). A cell's unused blocks repeat the thumbnail's last block row and column, so
filtering at its edge blends the thumbnail with itself. A page large enough to stream as
tiles gets its tiled copy beside it, as `engine bake` writes one.

Pages are kept in the view cache under `atlas/<key>/`, the key a hash of the thumbnails'
cache folders in their order, so a second run of the same wall finds them at once;
`manifest.json` holds each thumbnail's slot. A thumbnail that cannot be read leaves its
slot empty and is listed, so its image is drawn from its own file instead. A page that does
not parse (cut short, zero-filled) or differs from its checksums (a CRC32 per level,
engine.textures.checksum) makes the atlas a miss: `load` removes it with one warning
and the caller builds the atlas again.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import TextureFormatError
from ..formats import get
from ..memory.sizes import mip_count, mip_dims
from ..textures import checksum
from ..textures.decode import decode_image
from ..textures.durable import commit, sweep_temps, write_atomic
from ..textures.encode import encode_image
from ..textures.ktx2_write import write_ktx2
from ..textures.mipgen import generate_mips
from ..textures.reader import open_texture
from ..textures.tiled import BAKE_MIN_SIZE, write_sidecar

log = logging.getLogger(__name__)

#: Edge of one atlas page in texels (capped by the driver's largest texture by the caller).
PAGE = 4096
MANIFEST = "manifest.json"
VERSION = 1


@dataclass(frozen=True)
class Slot:
    """Where one thumbnail lies: page number and its texel rectangle on level 0."""

    page: int
    x: int
    y: int
    width: int
    height: int

    def uv(self, page_edge: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """UV transform that maps a quad's UV square onto this slot of its page."""
        s = float(page_edge)
        return ((self.width / s, 0.0, self.x / s), (0.0, self.height / s, self.y / s))


@dataclass(frozen=True)
class Atlas:
    """Pages (KTX2 files) and a slot per thumbnail (None: not in the atlas)."""

    pages: tuple[Path, ...]
    slots: tuple[Slot | None, ...]
    page_edge: int


def atlas_dir(root: Path, names: Sequence[str], cell: int, page_edge: int) -> Path:
    """The cache folder of the atlas of the thumbnails `names` identify, in this order."""
    h = hashlib.sha1(f"{VERSION}\0{cell}\0{page_edge}".encode())
    h.update("\0".join(names).encode())
    digest = h.hexdigest()
    return root / "atlas" / digest[:2] / digest


def load(folder: Path, count: int) -> Atlas | None:
    """The atlas kept in `folder`, or None when it is missing, incomplete or not for
    `count` thumbnails."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        pages = tuple(folder / name for name in data["pages"])
        slots = tuple(None if s is None else Slot(**s) for s in data["slots"])
        edge = int(data["page_edge"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    sweep_temps(folder)
    if len(slots) != count or not all(p.is_file() for p in pages):
        return None
    # the pages' checksums on threads: zlib's CRC runs without the GIL, and a wall of 10,000
    # thumbnails has some 400 MiB of pages to check before its first frame
    with ThreadPoolExecutor(min(len(pages), os.cpu_count() or 1) or 1) as pool:
        problems = list(pool.map(_damage, pages))
    for page, problem in zip(pages, problems):
        if problem is not None:
            log.warning("cache: atlas page %s is damaged (%s); the atlas is made again",
                        page, problem)
            page.unlink(missing_ok=True)
            return None
    return Atlas(pages, slots, edge)


def _damage(page: Path) -> str | None:
    """What is wrong with an atlas page (engine.textures.checksum); None when intact."""
    try:
        checksum.verify(open_texture(page))
    except TextureFormatError as exc:
        return exc.problem
    return None


def build(folder: Path, thumbs: Sequence[Path], cell: int, page_edge: int,
          executor: Executor | None = None) -> Atlas | None:
    """Copy `thumbs` (BCn KTX2 chains, each at most `cell` texels on a side, one pixel
    format) into pages of `page_edge` texels in `folder`, a page a task on `executor` (in
    this process without one); None when there is nothing to put in one (fewer than two
    thumbnails that can be read)."""
    per_row = page_edge // cell
    per_page = per_row * per_row
    dims: list[tuple[int, int] | None] = []
    fmt_name = None
    for path in thumbs:
        try:
            tf = open_texture(path)
        except TextureFormatError as exc:
            log.info("atlas: %s left out: %s", path, exc.problem)
            dims.append(None)
            continue
        if fmt_name is None:
            fmt_name = tf.format
        ok = tf.format == fmt_name and tf.width <= cell and tf.height <= cell and \
            tf.layers == 1 and tf.faces == 1 and tf.depth == 1
        dims.append((tf.width, tf.height) if ok else None)
    members = [i for i, d in enumerate(dims) if d is not None]
    if fmt_name is None or len(members) < 2:
        return None
    slots: list[Slot | None] = [None] * len(thumbs)
    pages: list[list[int]] = []
    for n, i in enumerate(members):
        k = n % per_page
        if k == 0:
            pages.append([])
        pages[-1].append(i)
        w, h = dims[i]  # type: ignore[misc]
        slots[i] = Slot(n // per_page, (k % per_row) * cell, (k // per_row) * cell, w, h)
    folder.mkdir(parents=True, exist_ok=True)
    sweep_temps(folder)
    jobs = [(str(folder / f"page{p}.ktx2"), fmt_name, [str(thumbs[i]) for i in on_page],
             [slots[i] for i in on_page], cell, page_edge) for p, on_page in enumerate(pages)]
    if executor is None:
        names = [write_page(*job) for job in jobs]
    else:
        names = [f.result() for f in [executor.submit(write_page, *job) for job in jobs]]
    manifest = {"pages": names, "page_edge": page_edge,
                "slots": [None if s is None else asdict(s) for s in slots]}
    write_atomic(folder / MANIFEST, json.dumps(manifest).encode("utf-8"))
    return Atlas(tuple(folder / n for n in names), tuple(slots), page_edge)


def write_page(path: str, fmt_name: str, thumbs: list[str], slots: list[Slot], cell: int,
               page_edge: int) -> str:
    """Worker job: write one page of `thumbs` at their `slots`; the page file's name."""
    out = Path(path)
    levels = _page_levels(get(fmt_name), [open_texture(t) for t in thumbs], slots, cell,
                          page_edge)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        write_ktx2(tmp, fmt_name, page_edge, page_edge, levels, checksums=True)
        commit(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    if page_edge >= BAKE_MIN_SIZE:  # a page this large streams as tiles: its tiled copy
        write_sidecar(out)
    return out.name


def _page_levels(fmt, thumbs: list, slots: list[Slot], cell: int, page_edge: int
                 ) -> list[bytes]:
    """Every level of one page: block copies while a cell is a block or more, then the
    rest filtered down from the last copied level."""
    bw, bh, bb = fmt.block_w, fmt.block_h, fmt.block_bytes
    count = mip_count(page_edge, page_edge)
    out: list[bytes] = []
    level = 0
    while level < count and (cell >> level) >= max(bw, bh):
        edge = page_edge >> level
        page = np.zeros((edge // bh, edge // bw, bb), np.uint8)
        cell_b = (cell >> level) // bw
        for tf, s in zip(thumbs, slots):
            if level >= len(tf.levels):
                continue
            w, h = mip_dims(tf.width, tf.height, level)
            cols, rows = -(-w // bw), -(-h // bh)
            blocks = np.frombuffer(tf.read_level(level), np.uint8).reshape(rows, cols, bb)
            x0, y0 = (s.x >> level) // bw, (s.y >> level) // bh
            region = np.pad(blocks, ((0, cell_b - rows), (0, cell_b - cols), (0, 0)),
                            mode="edge")
            page[y0:y0 + cell_b, x0:x0 + cell_b] = region
        out.append(page.tobytes())
        level += 1
    if level < count:
        edge = page_edge >> (level - 1)
        rgba = decode_image(fmt.name, out[-1], edge, edge)
        for small in generate_mips(rgba, colorspace="srgb" if fmt.srgb else "linear")[1:]:
            out.append(encode_image(small, fmt.name))
    return out
