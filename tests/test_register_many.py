"""Bulk registration (`LevelStreamer.register_many`) and the batched level upload.

The bulk path reads each file once for its header and tail and shares one header parse
among alike files; these tests hold it to exactly what the reader and the per-level path
give: the same TextureFile, the same bytes on the GPU, the same ledger, later level reads
that still work (DDS and supercompressed included), and all-or-nothing on bad input.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from streaming_helpers import make_textures, row_view, step
from texture_helpers import texconv_dds

from engine import textures
from engine.errors import GLOutOfMemoryError, TextureFormatError
from engine.memory.governor import Governor
from engine.memory.sizes import level_bytes, mip_count, mip_dims
from engine.streaming.levels.backends import CATEGORY
from engine.streaming.handles import HeadReader
from engine.streaming.levels.streamer import LevelStreamer
from engine.textures.ktx2_write import write_ktx2
from engine.memory.budget import Budget


def _levels(fmt: str, size: int, images: int = 1, seed: int = 1) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, level_bytes(fmt, *mip_dims(size, size, lvl)) * images,
                         dtype=np.uint8).tobytes() for lvl in range(mip_count(size, size))]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> list[Path]:
    """Alike BC1 files, other sizes and formats, a tail past the first read (RGBA8),
    zstd, a cube map, an array and a DDS: every route through the bulk reader."""
    root = tmp_path_factory.mktemp("bulk")
    paths = make_textures(root, 5, 256)  # alike: one header parse
    extra = [("small.ktx2", "BC1_RGBA", 128, {}), ("bc7.ktx2", "BC7", 256, {}),
             ("rgba.ktx2", "RGBA8", 128, {}),  # tail of 21.8 KB: beyond the first read
             ("zstd.ktx2", "BC3", 128, {"supercompression": "zstd"}),
             ("cube.ktx2", "BC1_RGBA", 64, {"faces": 6}),
             ("array.ktx2", "BC7", 64, {"layers": 3})]
    for i, (name, fmt, size, kw) in enumerate(extra):
        images = kw.get("faces", 1) * max(1, kw.get("layers", 0))
        write_ktx2(root / name, fmt, size, size, _levels(fmt, size, images, seed=i), **kw)
        paths.append(root / name)
    dds = root / "t.dds"
    dds.write_bytes(texconv_dds(98, "BC7", 64, 64, levels=7)[0])
    return paths + [dds]


def _streamer(device) -> LevelStreamer:
    return LevelStreamer(device, backend="realloc", staging_bytes=64 << 10, io_workers=0)


def _gpu_level(device, tex, tf, level: int) -> bytes:
    """What the GPU holds of a whole level, in KTX2 order (a cube map face by face)."""
    if tf.faces == 6 and tf.layers == 1:
        return b"".join(device.commands.read_level(tex, level, face) for face in range(6))
    return device.commands.read_level(tex, level)


@pytest.mark.needs("BC7 sampling")
def test_bulk_registration_equals_the_reader(device, mixed):
    """Same TextureFile as `textures.open`, same tail bytes on the GPU, same ledger bytes
    and tail level as registering the files one at a time."""
    bulk, single = _streamer(device), _streamer(device)
    try:
        keys = [(f"k{i}", p) for i, p in enumerate(mixed)]
        ids = bulk.register_many(keys)
        assert ids == list(range(len(mixed)))
        assert [single.register(k, p) for k, p in keys] == ids
        for tid, path in enumerate(mixed):
            ref = textures.open(path)
            a, b = bulk.items[tid], single.items[tid]
            assert a.tf == ref and type(a.tf) is type(ref) and a.tf.path == Path(path)
            assert a.base == b.base < len(ref.levels)
            assert a.tex.nbytes == b.tex.nbytes
            for lvl in range(a.base, len(ref.levels)):
                want = ref.read_level_all(lvl)
                assert _gpu_level(device, a.tex, ref, lvl) == want, (path.name, lvl)
                assert _gpu_level(device, b.tex, ref, lvl) == want, (path.name, lvl)
        assert {it.tex.glo for it in bulk.items}.isdisjoint({it.tex.glo for it in single.items})
    finally:
        bulk.release()
        single.release()


@pytest.mark.needs("BC7 sampling")
def test_level_reads_and_streaming_after_bulk_registration(device, mixed):
    """The kept TextureFiles read any level later (handle cache for plain KTX2, the reader
    for zstd and DDS), and the streamer streams from them."""
    s = _streamer(device)
    try:
        s.register_many([(p.stem, p) for p in mixed])
        for tid, path in enumerate(mixed):
            ref = textures.open(path)
            for lvl in (0, len(ref.levels) - 1):
                assert s.registry.read(tid, lvl) == ref.read_level_all(lvl)
        gov = Governor(budget=Budget("1GiB"))
        for f in range(30):
            step(device, gov, s, row_view(f, (f * 0.3, 0.0, 1.5), len(mixed)))
        assert s.stats().loads > 0 and s.stats().io_errors == 0
    finally:
        s.release()


def test_keys_keep_their_ids_and_duplicates_are_not_read(device, mixed, tmp_path):
    s = _streamer(device)
    try:
        assert s.register("a", mixed[0]) == 0
        missing = tmp_path / "never-read.ktx2"
        ids = s.register_many([("a", missing), ("b", mixed[1]), ("b", missing),
                               ("c", mixed[2])])
        assert ids == [0, 1, 1, 2]
        assert len(s.items) == 3 and s.register_many([]) == []
    finally:
        s.release()


def _corrupt(path: Path, how: str, good: Path) -> None:
    data = bytearray(good.read_bytes())
    if how == "truncated":  # the level index points past the end
        path.write_bytes(bytes(data[:len(data) // 2]))
    elif how == "short-header":
        path.write_bytes(bytes(data[:40]))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "not-a-texture":
        path.write_bytes(b"GIF89a" + bytes(200))
    elif how == "hostile-levels":  # levelCount 200
        struct.pack_into("<I", data, 40, 200)
        path.write_bytes(bytes(data))
    elif how == "hostile-size":  # level 0 claims a wrong byte length
        struct.pack_into("<Q", data, 80 + 8, 12345)
        path.write_bytes(bytes(data))
    elif how == "zero-width":
        struct.pack_into("<I", data, 20, 0)
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["missing", "truncated", "short-header", "empty",
                                 "not-a-texture", "hostile-levels", "hostile-size",
                                 "zero-width"])
def test_a_bad_file_fails_the_whole_batch(device, mixed, tmp_path, how):
    """A typed error naming the bad file; nothing of the batch stays registered, ledgered
    or alive (the device fixture checks leaks); earlier registrations stay; a retry
    without the bad entry works."""
    bad = tmp_path / f"{how}.ktx2"
    if how != "missing":
        _corrupt(bad, how, mixed[0])
    s = _streamer(device)
    try:
        s.register("before", mixed[0])
        held = device.ledger.category_total(CATEGORY)
        batch = [("g1", mixed[1]), ("g2", mixed[2]), ("bad", bad), ("g3", mixed[3])]
        with pytest.raises(TextureFormatError) as err:
            s.register_many(batch)
        assert err.value.path == str(bad) and str(bad) in str(err.value)
        assert [it.key for it in s.items] == ["before"]
        assert device.ledger.category_total(CATEGORY) == held
        device.flush_releases()
        assert len([o for o in device.live_objects() if o.label.startswith("g")]) == 0
        assert s.register_many([e for e in batch if e[0] != "bad"]) == [1, 2, 3]
    finally:
        s.release()


def test_gl_out_of_memory_fails_the_whole_batch(device, mixed):
    """The device's fault injector fails the third texture's allocation: the error keeps
    its type and names the file; the two made before it are released."""
    s = _streamer(device)
    try:
        held = device.ledger.category_total(CATEGORY)
        live = len(device.live_objects())
        device.fault_injector = lambda what, nbytes: "'k2@" in what
        try:
            with pytest.raises(GLOutOfMemoryError) as err:
                s.register_many([(f"k{i}", p) for i, p in enumerate(mixed[:5])])
        finally:
            device.fault_injector = None
        assert str(mixed[2]) in str(err.value)
        assert s.items == [] and device.ledger.category_total(CATEGORY) == held
        assert len(device.live_objects()) == live
        assert s.register_many([(f"k{i}", p) for i, p in enumerate(mixed[:5])]) == \
            [0, 1, 2, 3, 4]
    finally:
        s.release()


def test_head_reader_shares_one_parse_and_reads_once(mixed):
    """Alike files: one parse, copies that are independent objects equal to the reader's;
    a tail beyond the first read takes one more read, and later files are read further."""
    reader = HeadReader()
    tails = []
    for p in mixed[:5]:
        tf, tail, data = reader.open_tail(p, lambda tf: 2)
        ref = textures.open(p)
        assert tf == ref and tail == 2
        assert data == {lvl: ref.read_level_all(lvl) for lvl in range(2, len(ref.levels))}
        tails.append(tf)
    assert reader.parses == 1 and reader.extra_reads == 0
    tails[0].extra["mine"] = 1  # one file's metadata is its own
    assert "mine" not in tails[1].extra
    rgba = next(p for p in mixed if p.name == "rgba.ktx2")
    before = reader.read_ahead
    tf, tail, data = reader.open_tail(rgba, lambda tf: 1)
    assert reader.extra_reads == 1 and reader.read_ahead > before
    assert data[1] == textures.open(rgba).read_level_all(1)


def test_every_provider_registers_in_batches(device, mixed):
    """`register_many` is part of the provider contract: the static provider, which makes
    every texture whole anyway, registers one by one, same key same id."""
    from engine.streaming.contract import TextureProvider
    from engine.streaming.static import StaticTextureProvider

    p = StaticTextureProvider(device)
    try:
        assert isinstance(p, TextureProvider)
        assert p.register_many([("a", mixed[0]), ("b", mixed[1]), ("a", mixed[0])]) == [0, 1, 0]
        assert p.register("b", mixed[1]) == 1
    finally:
        p.release()


# ---------------------------------------------------------------------- upload_levels
@pytest.mark.parametrize("fmt,cube,layers", [("BC1_RGBA", False, 1), ("BC7", True, 1),
                                             ("BC3", False, 3), ("RGBA8", False, 1),
                                             ("RGBA8", True, 1)])
@pytest.mark.needs("BC7 sampling")
def test_upload_levels_equals_per_level_uploads(device, fmt, cube, layers):
    """Same GPU bytes as one `upload` per level and image, for 2D, cube and array
    textures, compressed or not; one error check for the whole texture."""
    size, base = 32, 1
    images = (6 if cube else 1) * layers
    data = _levels(fmt, size, images, seed=3)
    n = len(data) - base
    kw = dict(levels=n, base_level=base, layers=layers, cube=cube, label="ul")
    a = device.storage_texture(fmt, size, size, **kw)
    b = device.storage_texture(fmt, size, size, **kw)
    try:
        drains = []
        real = device._alloc.drain_errors
        device._alloc.drain_errors = lambda: drains.append(1) or real()
        try:
            device.commands.upload_levels(a, [(lvl, data[lvl]) for lvl in range(base, len(data))])
        finally:
            del device._alloc.drain_errors
        assert len(drains) == 1
        for lvl in range(base, len(data)):
            step_ = len(data[lvl]) // images
            for i in range(images):
                layer, face = divmod(i, 6 if cube else 1)
                device.commands.upload(b, lvl, data[lvl][i * step_:(i + 1) * step_], layer, face)
        for lvl in range(base, len(data)):
            faces = range(6) if cube and layers == 1 else [0]
            for face in faces:
                assert device.commands.read_level(a, lvl, face) == device.commands.read_level(b, lvl, face)
            if not (cube and layers == 1):
                assert device.commands.read_level(a, lvl) == data[lvl]
    finally:
        device.release(a)
        device.release(b)


@pytest.mark.needs("BC1_RGBA sampling")
def test_upload_levels_checks_sizes_before_any_upload(device):
    tex = device.storage_texture("BC1_RGBA", 16, 16, levels=3, label="ul-bad")
    try:
        good = [level_bytes("BC1_RGBA", *mip_dims(16, 16, lvl)) for lvl in range(3)]
        with pytest.raises(ValueError, match="level 1 needs"):
            device.commands.upload_levels(tex, [(0, bytes(good[0])), (1, bytes(good[1] + 8))])
        with pytest.raises(ValueError, match="not stored"):
            device.commands.upload_levels(tex, [(3, bytes(8))])
        device.commands.upload_levels(tex, [(lvl, memoryview(bytearray([lvl + 1]) * good[lvl]))
                                   for lvl in range(3)])  # writable views: no copy
        assert device.commands.read_level(tex, 2) == bytes([3]) * good[2]
        device.check_errors("after")
    finally:
        device.release(tex)


@pytest.mark.needs("BC1_RGBA sampling")
def test_streaming_provider_batches_and_refuses_a_bad_file_whole(device, mixed, tmp_path):
    """The streaming provider opens and sorts every file of a batch before making anything: a
    bad file raises with nothing of the batch registered; a good batch gives composite ids
    in order, the big BC7 texture virtual, the rest by whole levels, as one by one."""
    from engine.streaming.provider import StreamingProvider
    from engine.streaming.settings import StreamerSettings

    big = tmp_path / "big.ktx2"
    write_ktx2(big, "BC7", 1024, 1024, _levels("BC7", 1024))
    bad = tmp_path / "bad.ktx2"
    _corrupt(bad, "truncated", mixed[0])
    cfg = StreamerSettings(backend="realloc", io_workers=0)
    m = StreamingProvider(device, cfg, deterministic=True)
    try:
        batch = [("a", mixed[0]), ("big", big), ("b", mixed[1])]
        with pytest.raises(TextureFormatError):
            m.register_many([*batch, ("bad", bad)])
        assert m.stats().textures == 0 and m.virtual_system() is None
        assert m.register_many(batch) == [0, 1, 2]
        assert list(m.virtual_ids()) == [-1, 0, -1]
        assert m.register("b", mixed[1]) == 2 and m.register("c", mixed[2]) == 3
    finally:
        m.release()


def test_streaming_provider_reads_each_file_once(device, mixed, monkeypatch):
    """The provider reads a batch's headers to choose whole levels or virtual, and the
    whole-level streamer takes those bytes for the tails: one head read a file, and the
    same TextureFiles and tail bytes as a streamer registering the files itself."""
    from engine.streaming.provider import StreamingProvider
    from engine.streaming.settings import StreamerSettings

    reads: list[str] = []
    real = HeadReader.read_head
    monkeypatch.setattr(HeadReader, "read_head",
                        lambda self, path: reads.append(str(path)) or real(self, path))
    files = mixed[:5]
    cfg = StreamerSettings(backend="realloc", io_workers=0)
    m = StreamingProvider(device, cfg, deterministic=True)
    alone = LevelStreamer(device, cfg, io_workers=0)
    try:
        m.register_many([(p.stem, p) for p in files])
        assert sorted(reads) == sorted(str(p) for p in files)
        alone.register_many([(p.stem, p) for p in files])
        assert [it.tf for it in m.levels.items] == [it.tf for it in alone.items]
        assert [device.commands.read_level(it.tex, it.base) for it in m.levels.items] == \
            [device.commands.read_level(it.tex, it.base) for it in alone.items]
    finally:
        m.release()
        alone.release()
