"""OME-Zarr chunks read from their files directly (engine.science.chunks) give exactly what
zarr-python reads, for the codecs, key encodings, byte orders and memory orders the direct
path takes; arrays it cannot read (sharded, transposed, checksummed) still read through
zarr; a missing chunk is its fill value and a damaged one a typed error."""
from __future__ import annotations

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

from lab.http_files import served  # noqa: E402

from engine.errors import ImageSourceError  # noqa: E402
from engine.science.chunks import DirectChunks  # noqa: E402
from engine.science.readers import open_image_source  # noqa: E402

SHAPE = (2, 300, 200)  # edge chunks on both axes at 128
NGFF_AXES = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
             {"name": "x", "type": "space"}]


def _image(tmp_path, zarr_format, dtype="uint16", name="image.zarr", **array_kwargs):
    rng = np.random.default_rng(5)
    data = (rng.random(SHAPE) * 60000).astype(dtype)
    g = zarr.open_group(str(tmp_path / name), mode="w", zarr_format=zarr_format)
    a = g.create_array("0", shape=SHAPE, chunks=(1, 128, 128), dtype=data.dtype,
                       **array_kwargs)
    a[:] = data
    ms = {"axes": NGFF_AXES, "datasets": [{"path": "0"}]}
    if zarr_format == 3:
        g.attrs["ome"] = {"version": "0.5", "multiscales": [ms]}
    else:
        g.attrs["multiscales"] = [{"version": "0.4", **ms}]
    return tmp_path / name, data


def _every_tile(source, data):
    for c in range(SHAPE[0]):
        rows, cols = source.levels[0].grid(source.tile)
        for ty in range(rows):
            for tx in range(cols):
                got = source.read_tile(0, c, ty, tx)
                want = data[c, ty * 128:(ty + 1) * 128, tx * 128:(tx + 1) * 128]
                assert got.dtype == want.dtype.newbyteorder("=")
                np.testing.assert_array_equal(got, want)


V3 = [{}, {"compressors": None}, {"compressors": zarr.codecs.ZstdCodec(level=3, checksum=True)},
      {"compressors": zarr.codecs.GzipCodec()}, {"compressors": zarr.codecs.BloscCodec()},
      {"serializer": zarr.codecs.BytesCodec(endian="big")},
      {"chunk_key_encoding": {"name": "v2", "separator": "."}},
      {"chunk_key_encoding": {"name": "default", "separator": "."}}]
V2 = [{}, {"compressors": None}, {"compressors": numcodecs.Zstd()},
      {"compressors": numcodecs.GZip()}, {"order": "F"},
      {"chunk_key_encoding": {"name": "v2", "separator": "/"}}]


@pytest.mark.parametrize("zarr_format,kwargs", [(3, k) for k in V3] + [(2, k) for k in V2])
def test_direct_reads_equal_zarr_for_each_codec_and_layout(tmp_path, zarr_format, kwargs):
    location, data = _image(tmp_path, zarr_format, **kwargs)
    source = open_image_source(location)
    array = source._arrays[0]
    assert isinstance(array, DirectChunks)
    _every_tile(source, data)
    assert array.direct == SHAPE[0] * 3 * 2
    source.close()


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32"])
def test_direct_reads_keep_every_dtype(tmp_path, dtype):
    location, data = _image(tmp_path, 3, dtype=dtype)
    source = open_image_source(location)
    _every_tile(source, data)
    source.close()


@pytest.mark.parametrize("kwargs", [
    {"shards": (1, 256, 256)},
    {"filters": zarr.codecs.TransposeCodec(order=(0, 2, 1))},
    {"compressors": (zarr.codecs.Crc32cCodec(),)}])
def test_arrays_the_direct_path_cannot_read_go_through_zarr(tmp_path, kwargs):
    location, data = _image(tmp_path, 3, **kwargs)
    source = open_image_source(location)
    assert not isinstance(source._arrays[0], DirectChunks)
    _every_tile(source, data)
    source.close()


def test_a_missing_chunk_is_the_fill_value_and_a_damaged_one_a_typed_error(tmp_path):
    location, data = _image(tmp_path, 3, dtype="float32", fill_value=float("nan"))
    (location / "0" / "c" / "1" / "0" / "1").unlink()
    (location / "0" / "c" / "0" / "2" / "0").write_bytes(b"not zstd")
    source = open_image_source(location)
    assert np.isnan(source.read_tile(0, 1, 0, 1)).all()
    with pytest.raises(ImageSourceError, match=r"tile \(2, 0\) of channel 0"):
        source.read_tile(0, 0, 2, 0)
    np.testing.assert_array_equal(source.read_tile(0, 0, 1, 1), data[0, 128:256, 128:])
    source.close()


def test_direct_reads_over_http(tmp_path):
    pytest.importorskip("aiohttp")
    location, data = _image(tmp_path, 2)
    (location / "0" / "1.2.0").unlink()  # a missing chunk over HTTP is a 404
    data[1, 256:, :128] = 0
    with served(tmp_path) as base:
        source = open_image_source(f"{base}/{location.name}")
        assert isinstance(source._arrays[0], DirectChunks)
        _every_tile(source, data)
        source.close()


def test_zstd_frames_decode_as_numcodecs_does() -> None:
    """With or without the content size in the frame header, and with a checksum; a
    damaged frame is the ValueError the reader turns into ImageSourceError."""
    import numcodecs
    import zstandard

    from engine.science.chunks import ZstdFrames

    data = np.random.default_rng(1).integers(0, 4000, (256, 256), np.uint16).tobytes()
    frames = ZstdFrames(len(data))
    plain = numcodecs.Zstd(checksum=True).encode(data)
    sizeless = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert frames.decode(plain) == numcodecs.Zstd().decode(plain) == data
    assert frames.decode(sizeless) == data
    with pytest.raises(ValueError, match="zstd"):
        frames.decode(plain[:-9] + b"\0" * 9)


def test_a_zstd_frame_claiming_more_than_a_chunk_is_refused() -> None:
    import zstandard

    from engine.science.chunks import ZstdFrames

    big = zstandard.ZstdCompressor().compress(bytes(1 << 20))  # says 1 MiB in its header
    with pytest.raises(ValueError, match="claims more"):
        ZstdFrames(128 * 1024).decode(big)
