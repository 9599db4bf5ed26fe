"""Open OME-Zarr (OME-NGFF multiscales, zarr v2 and v3) and tiled TIFF (OME-TIFF, pyramidal
TIFF, SVS-like slides) as `ArraySource`s, from a local path or an http(s) URL (and the slide
formats only OpenSlide reads, engine.science.slides).

Both go through zarr-python's lazy arrays: an OME-Zarr's own, and for a TIFF tifffile's zarr
store over its tiled pages (one per series level), so a tile read decodes only the chunks
or TIFF tiles under it; an OME-Zarr tile that is one chunk of common codecs is read from
the chunk's file directly (engine.science.chunks), a TIFF tile from its offset in the file
(engine.science.tiff_pages). URLs go through fsspec (HTTP needs
aiohttp and requests: the `science` extra). Every failure to open is an `ImageSourceError`
naming the source and what is wrong; a dtype the GPU cannot keep exactly is an `UnsupportedFormatError`.
"""
from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ImageSourceError, install_hint
from .chunks import direct_chunks
from .slides import OPENSLIDE_SUFFIXES, open_slide
from .source import ArraySource, Axes, ChunkedSource
from .tiff_pages import RangeRead, TiffLevel, file_ranges, url_ranges

log = logging.getLogger(__name__)

ZARR_SUFFIXES = (".zarr", ".ome.zarr")
TIFF_SUFFIXES = (".tif", ".tiff", ".ome.tif", ".ome.tiff", ".svs", ".btf", ".tf8", ".ndpi",
                 ".scn")
#: what `engine view` and `engine.ImageView` show as scientific images by their name alone (a
#: plain .tif stays a picture unless asked otherwise)
SCIENCE_SUFFIXES = ZARR_SUFFIXES + (".ome.tif", ".ome.tiff", ".svs") + OPENSLIDE_SUFFIXES
#: axes assumed when an OME-Zarr's multiscales has none (NGFF before 0.4), by dimensions
DEFAULT_AXES = {2: "yx", 3: "cyx", 4: "czyx", 5: "tczyx"}


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def is_science_location(location: str | os.PathLike | ChunkedSource) -> bool:
    """Whether `location` is shown as a scientific image by its name alone: a source
    object, a URL, an OME-Zarr, an OME-TIFF or a slide."""
    if isinstance(location, ChunkedSource):
        return True
    text = os.fspath(location)
    return is_url(text) or text.rstrip("/").lower().endswith(SCIENCE_SUFFIXES)


def _need(module: str, location: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImageSourceError(location, f"reading it needs {exc.name}: "
                                         f"{install_hint(extra)}") from exc


def open_image_source(location: str | os.PathLike | ChunkedSource) -> ChunkedSource:
    """The source at `location` (a path or URL), by its suffix or, for a local folder or
    file without one, by what it holds."""
    if isinstance(location, ChunkedSource):
        return location
    text = os.fspath(location)
    if not is_url(text) and not os.path.exists(text):
        raise ImageSourceError(text, "no such file or folder")
    name = text.rstrip("/").lower()
    if name.endswith(ZARR_SUFFIXES):
        return open_ome_zarr(text)
    if name.endswith(TIFF_SUFFIXES):
        return open_tiff(text)
    if name.endswith(OPENSLIDE_SUFFIXES):
        return open_slide(text)
    if not is_url(text):
        if os.path.isdir(text):
            return open_ome_zarr(text)
        return open_tiff(text)
    raise ImageSourceError(text, "unknown kind of source; accepted: an OME-Zarr (.zarr), a "
                                 "TIFF (.tif, .tiff, .ome.tif, .svs) or a slide OpenSlide "
                                 "reads (.mrxs, .vms, .svslide, .dcm)")


def _multiscale(location: str, attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first multiscales entry (NGFF 0.5 nests it under "ome"), checked."""
    ome = attrs.get("ome", attrs)
    entries = ome.get("multiscales") if isinstance(ome, Mapping) else None
    if not isinstance(entries, list) or not entries or not isinstance(entries[0], Mapping):
        raise ImageSourceError(location, "no OME-NGFF 'multiscales' list in its attributes")
    ms = entries[0]
    datasets = ms.get("datasets")
    if not isinstance(datasets, list) or not datasets or not all(
            isinstance(d, Mapping) and isinstance(d.get("path"), str) for d in datasets):
        raise ImageSourceError(location, "multiscales[0].datasets must be a non-empty list "
                                         "of {'path': str}")
    return ms


def _axes_names(location: str, ms: Mapping[str, Any], ndim: int) -> list[str]:
    axes = ms.get("axes")
    if axes is None:
        if ndim not in DEFAULT_AXES:
            raise ImageSourceError(location, f"no axes for {ndim} dimensions")
        return list(DEFAULT_AXES[ndim])
    if not isinstance(axes, list):
        raise ImageSourceError(location, "multiscales[0].axes must be a list")
    names = [a.get("name") if isinstance(a, Mapping) else a for a in axes]
    if not all(isinstance(n, str) for n in names):
        raise ImageSourceError(location, "multiscales[0].axes: every axis needs a name")
    return names


def _channel_labels(attrs: Mapping[str, Any]) -> list[str]:
    ome = attrs.get("ome", attrs)
    omero = ome.get("omero", attrs.get("omero")) if isinstance(ome, Mapping) else None
    channels = omero.get("channels") if isinstance(omero, Mapping) else None
    if not isinstance(channels, list):
        return []
    return [str(c.get("label", f"channel {i}")) if isinstance(c, Mapping) else f"channel {i}"
            for i, c in enumerate(channels)]


def open_ome_zarr(location: str) -> ArraySource:
    """An OME-Zarr image (zarr v2 or v3; the format is the store's own) at a path or URL."""
    zarr = _need("zarr", location, "science")
    if is_url(location):
        _need("aiohttp", location, "science")
    try:
        group = zarr.open_group(location, mode="r")
        attrs = dict(group.attrs)
    except (OSError, ValueError, KeyError) as exc:
        raise ImageSourceError(location, f"not a readable zarr group: {exc}") from exc
    ms = _multiscale(location, attrs)
    arrays = []
    url = is_url(location)
    for i, d in enumerate(ms["datasets"]):
        try:
            array = group[d["path"]]
        except (KeyError, OSError, ValueError) as exc:
            raise ImageSourceError(location, f"multiscales[0].datasets[{i}].path "
                                             f"{d['path']!r}: no such array") from exc
        if not hasattr(array, "shape"):
            raise ImageSourceError(location, f"multiscales[0].datasets[{i}] is a group")
        base = f"{location.rstrip('/')}/{d['path'].strip('/')}"
        arrays.append(direct_chunks(array, base if url else os.path.normpath(base), url))
    ndim = len(arrays[0].shape)
    if any(len(a.shape) != ndim for a in arrays):
        raise ImageSourceError(location, "levels of different dimensions")
    axes = Axes.parse(location, _axes_names(location, ms, ndim), ndim)
    return ArraySource(location, arrays, axes, channel_names=_channel_labels(attrs))


def _tiff_axes(location: str, axes: str, ndim: int) -> Axes:
    names = list(axes.lower())
    if "c" in names and "s" in names:  # samples of each channel: not one image per channel
        raise ImageSourceError(location, f"TIFF axes {axes}: both channels and samples")
    return Axes.parse(location, names, ndim)


def open_tiff(location: str) -> ArraySource:
    """The first series of a TIFF (its levels: OME-TIFF SubIFDs, pyramidal pages, SVS
    levels), tile by tile: whole TIFF tiles read directly (engine.science.tiff_pages),
    other reads through tifffile's zarr store."""
    tifffile = _need("tifffile", location, "huge")
    zarr = _need("zarr", location, "science")
    handle = None
    try:
        if is_url(location):
            fsspec = _need("fsspec", location, "science")
            _need("aiohttp", location, "science")
            handle = fsspec.open(location, "rb").open()
            tif = tifffile.TiffFile(handle, name=os.path.basename(location))
        else:
            tif = tifffile.TiffFile(location)
    except FileNotFoundError as exc:
        raise ImageSourceError(location, "no such file") from exc
    except (OSError, ValueError, tifffile.TiffFileError) as exc:
        if handle is not None:
            handle.close()
        raise ImageSourceError(location, f"not a readable TIFF: {exc}") from exc

    def close_file() -> None:
        tif.close()
        if handle is not None:
            handle.close()
    read: RangeRead | None = None
    close_ranges: Callable[[], None] = lambda: None
    try:
        if is_url(location):
            read = url_ranges(location)
        else:
            read, close_ranges = file_ranges(location)
    except OSError as exc:
        close_file()
        raise ImageSourceError(location, f"cannot open: {exc}") from exc

    def close() -> None:
        close_ranges()
        close_file()
    try:
        if not tif.series:
            raise ImageSourceError(location, "no image series")
        series = tif.series[0]
        if not series.levels[0].keyframe.is_tiled:
            log.warning("%s is not tiled: a tile read decodes whole strips", location)
        lock = threading.Lock()  # the TiffFile's one handle, for reads through its zarr store
        arrays: Sequence[Any] = [
            TiffLevel(lv, zarr.open_array(series.aszarr(level=i), mode="r"), lock, read)
            for i, lv in enumerate(series.levels)]
        axes = _tiff_axes(location, series.axes, len(series.shape))
        return ArraySource(location, arrays, axes, on_close=close)
    except BaseException:
        close()
        raise
