"""A zarr array's chunks read straight from their files, one chunk a tile.

Why: a tile read through zarr-python's synchronous API costs about ten times the chunk's
own file read and decode (each call is handed to zarr's one event-loop thread and walks its
general indexing and codec pipeline), and every reader thread waits on that one loop. When a
tile is exactly one chunk and the chunk's codecs are the common ones, the zarr spec says all
there is to it: the chunk's key from its grid position, its bytes from the file (or URL)
under the array, compressors undone (numcodecs, zarr's own codec library), the bytes in the
stored byte order and memory order, a missing chunk all fill value. `DirectChunks` does that
in the calling thread and hands any other read (or any other array: sharded, transposed,
checksummed, unaligned) to zarr itself.
"""
from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: zarr v3 bytes-to-bytes codecs undone here, by their numcodecs ids
V3_COMPRESSORS = {"zstd": "zstd", "blosc": "blosc", "gzip": "gzip"}


class ZstdFrames:
    """zstd frames undone by python-zstandard (an engine dependency) rather than numcodecs,
    which makes a new context per call and copies more: a reader thread holds the GIL less
    of a frame's time (docs/benchmarks.md). One decompression context per thread (a context
    is not safe to share)."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes  # a chunk's size, for frames that do not say theirs
        self._local = threading.local()

    def decode(self, raw: Any) -> bytes:
        import zstandard

        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = zstandard.ZstdDecompressor()
        try:
            # a frame that claims more than a chunk would make decompress allocate it
            if zstandard.frame_content_size(raw) > self.nbytes:
                raise ValueError(f"zstd frame claims more than the chunk's {self.nbytes} bytes")
            return ctx.decompress(raw, max_output_size=self.nbytes)
        except zstandard.ZstdError as exc:  # the reader's type for a damaged chunk
            raise ValueError(f"zstd: {exc}") from exc


def _decoder(config: Mapping[str, Any], nbytes: int) -> Any:
    """The decoder of a numcodecs-style codec config, for chunks of `nbytes`."""
    import numcodecs

    if config.get("id") == "zstd":
        return ZstdFrames(nbytes)
    return numcodecs.get_codec(dict(config))


@dataclass(frozen=True)
class ChunkLayout:
    """What the spec says about an array's chunks (from its metadata document): the chunk
    shape, how a key is spelled, the stored dtype and memory order, the codecs to undo
    (last applied first) and the fill value."""

    chunks: tuple[int, ...]
    dtype: np.dtype
    order: str
    prefix: str
    separator: str
    decoders: tuple[Any, ...]
    fill: Any

    def key(self, coords: Sequence[int]) -> str:
        return self.prefix + self.separator.join(str(int(c)) for c in coords)

    def decode(self, raw: bytes) -> np.ndarray:
        data: Any = raw
        for codec in self.decoders:
            data = codec.decode(data)
        flat = np.frombuffer(memoryview(data), self.dtype)
        return flat.reshape(self.chunks, order=self.order)

    def empty(self) -> np.ndarray:
        return np.full(self.chunks, self.fill, self.dtype)


def _fill(value: Any) -> Any:
    if value is None:
        return 0
    if isinstance(value, str):  # "NaN", "Infinity", "-Infinity" (v3), or hex floats
        return float.fromhex(value) if value.startswith(("0x", "-0x")) else float(value)
    return value


def layout_of(meta: Mapping[str, Any]) -> ChunkLayout | None:
    """The layout of an array's metadata document (its zarr.json or .zarray), or None when
    its chunks need more than this reader does."""
    try:
        if meta.get("zarr_format") == 2:
            if meta.get("filters"):
                return None
            dtype = np.dtype(meta["dtype"])
            comp = meta.get("compressor")
            nbytes = math.prod(meta["chunks"]) * dtype.itemsize
            decoders = (_decoder(comp, nbytes),) if comp else ()
            return ChunkLayout(tuple(meta["chunks"]), dtype, meta.get("order", "C"), "",
                               meta.get("dimension_separator") or ".", decoders,
                               _fill(meta.get("fill_value")))
        if meta.get("zarr_format") != 3 or meta.get("storage_transformers"):
            return None
        grid = meta["chunk_grid"]
        encoding = meta["chunk_key_encoding"]
        if grid["name"] != "regular" or encoding["name"] not in ("default", "v2"):
            return None
        codecs = list(meta["codecs"])
        first = codecs[0]
        if first["name"] != "bytes":
            return None
        endian = (first.get("configuration") or {}).get("endian", "little")
        dtype = np.dtype(meta["data_type"]).newbyteorder("<" if endian == "little" else ">")
        shape = grid["configuration"]["chunk_shape"]
        decoders = []
        for c in reversed(codecs[1:]):
            if c["name"] not in V3_COMPRESSORS:
                return None
            decoders.append(_decoder({"id": V3_COMPRESSORS[c["name"]]},
                                     math.prod(shape) * dtype.itemsize))
        default = encoding["name"] == "default"
        sep = (encoding.get("configuration") or {}).get("separator", "/" if default else ".")
        return ChunkLayout(tuple(shape), dtype, "C",
                           "c" + sep if default else "", sep, tuple(decoders),
                           _fill(meta.get("fill_value")))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        log.debug("chunks read through zarr: %s", exc)
        return None


def whole_chunk(part: slice, size: int, n: int) -> tuple[int, int] | None:
    """(chunk number, length) when `part` of an axis of `n` cut in chunks of `size` is
    exactly one chunk (the last one may be shorter), else None."""
    start = part.start or 0
    stop = n if part.stop is None else part.stop
    if part.step not in (None, 1) or start % size or stop != min(n, start + size):
        return None
    return start // size, stop - start


def local_files(base: str) -> Callable[[str], bytes | None]:
    def get(key: str) -> bytes | None:
        try:
            with open(os.path.join(base, key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
    return get


def url_files(base: str) -> Callable[[str], bytes | None]:
    import fsspec

    fs = fsspec.filesystem("http")

    def get(key: str) -> bytes | None:
        try:
            return fs.cat_file(f"{base}/{key}")
        except FileNotFoundError:
            return None
    return get


class DirectChunks:
    """A zarr array whose one-chunk slices are read from the chunk's file directly; other
    indexing goes to the array. Looks like the array to ArraySource (shape, dtype,
    chunks)."""

    def __init__(self, array: Any, layout: ChunkLayout,
                 get: Callable[[str], bytes | None]) -> None:
        self.array = array
        self.layout = layout
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        self.chunks = layout.chunks
        self._get = get
        self.direct = 0

    def _chunk_of(self, index: tuple) -> tuple[tuple[int, ...], tuple] | None:
        """(chunk coordinates, index within the chunk) when `index` lies in one chunk and
        covers it along every sliced axis, else None."""
        coords, inner = [], []
        for i, size, n in zip(index, self.chunks, self.shape):
            if isinstance(i, slice):
                whole = whole_chunk(i, size, n)
                if whole is None:
                    return None
                coords.append(whole[0])
                inner.append(slice(0, whole[1]))
            else:
                coords.append(int(i) // size)
                inner.append(int(i) % size)
        return tuple(coords), tuple(inner)

    def __getitem__(self, index: tuple) -> np.ndarray:
        found = self._chunk_of(index) if isinstance(index, tuple) and len(index) == len(
            self.shape) else None
        if found is None:
            return self.array[index]
        coords, inner = found
        raw = self._get(self.layout.key(coords))
        chunk = self.layout.empty() if raw is None else self.layout.decode(raw)
        self.direct += 1
        return chunk[inner]


def direct_chunks(array: Any, base: str, url: bool) -> Any:
    """`array` read chunk by chunk from `base` (the folder or URL under which its chunk keys
    are), or `array` itself when its chunks need zarr's own pipeline."""
    meta = array.metadata.to_dict()
    layout = layout_of(meta)
    if layout is None or len(layout.chunks) != len(array.shape):
        return array
    return DirectChunks(array, layout, url_files(base) if url else local_files(base))
