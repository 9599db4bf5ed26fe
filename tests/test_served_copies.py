"""Copies of files in the format a driver is served them as (engine/streaming/served_copies.py):
made once in the background, then read as they are; a damaged copy is a miss, made again.
Pure file work: the driver is played by a sampling rule without BPTC."""
from __future__ import annotations

import time

import numpy as np

from engine.formats import get
from engine.streaming.levels.registry import served
from engine.streaming.served_copies import ServedCopies
from engine.textures import open_texture
from engine.textures.encode import encode_image
from engine.textures.ktx2_write import write_ktx2
from engine.textures.mipgen import generate_mips
from engine.textures.transcode import ServedFile


def no_bptc(fmt) -> bool:
    return not fmt.name.startswith(("BC7", "BC6H"))


def _bc7_file(path):
    y, x = np.mgrid[0:64, 0:64]
    img = np.stack([x * 4, y * 4, (x ^ y) * 4, np.full_like(x, 255)], -1).astype(np.uint8)
    levels = [encode_image(m, "BC7") for m in generate_mips(img)]
    write_ktx2(path, "BC7", 64, 64, levels)
    return open_texture(path)


def _wait(copies: ServedCopies) -> None:
    deadline = time.monotonic() + 30
    while not copies.idle():
        assert time.monotonic() < deadline, "the copy was never made"
        time.sleep(0.02)


def test_a_copy_is_made_once_then_read_as_it_is(tmp_path):
    copies = ServedCopies(tmp_path / "served")
    tf = _bc7_file(tmp_path / "t.ktx2")
    tail = {i: tf.read_level_all(i) for i in range(4, len(tf.levels))}
    first, first_tail = served(tf, tail, no_bptc, copies)
    assert isinstance(first, ServedFile) and first.pixel_format is get("BC3")
    _wait(copies)
    second, second_tail = served(tf, tail, no_bptc, copies)
    assert not isinstance(second, ServedFile) and second.pixel_format is get("BC3")
    assert second.path.parent == tmp_path / "served" and copies.made == 1
    assert second_tail == first_tail  # the same bytes as transcoding gives
    for i in range(len(tf.levels)):
        assert second.read_level_all(i) == first.read_level_all(i)


def test_a_damaged_copy_is_a_miss_and_made_again(tmp_path, caplog):
    copies = ServedCopies(tmp_path / "served")
    tf = _bc7_file(tmp_path / "t.ktx2")
    served(tf, {}, no_bptc, copies)
    _wait(copies)
    path = copies.path_for(tf, get("BC3"))
    path.write_bytes(b"\0" * 100)
    again, _ = served(tf, {}, no_bptc, copies)
    assert isinstance(again, ServedFile)  # transcoding meanwhile
    assert any("damaged" in r.getMessage() for r in caplog.records)
    _wait(copies)
    assert open_texture(path).pixel_format is get("BC3") and copies.made == 2


def test_a_sampled_format_needs_no_copy(tmp_path):
    copies = ServedCopies(tmp_path / "served")
    tf = _bc7_file(tmp_path / "t.ktx2")
    same, _ = served(tf, {}, lambda fmt: True, copies)
    assert same is tf and not (tmp_path / "served").exists()


def test_a_copy_whose_level_bytes_changed_is_a_miss(tmp_path, caplog):
    """Bytes flipped inside a level parse fine; the copy's checksum catches them."""
    copies = ServedCopies(tmp_path / "served")
    tf = _bc7_file(tmp_path / "t.ktx2")
    served(tf, {}, no_bptc, copies)
    _wait(copies)
    path = copies.path_for(tf, get("BC3"))
    copy = open_texture(path)
    data = bytearray(path.read_bytes())
    data[copy.levels[0].offset + 100] ^= 0xFF
    path.write_bytes(bytes(data))
    again, _ = served(tf, {}, no_bptc, copies)
    assert isinstance(again, ServedFile)
    assert any("checksum of level 0" in r.getMessage() for r in caplog.records)
    _wait(copies)
    assert copies.made == 2


def test_a_source_replaced_with_the_same_size_and_times_gets_another_copy(tmp_path):
    import os

    copies = ServedCopies(tmp_path / "served")
    tf = _bc7_file(tmp_path / "t.ktx2")
    before = copies.path_for(tf, get("BC3"))
    st = os.stat(tf.path)
    other = _bc7_file(tmp_path / "o.ktx2").path
    os.replace(other, tf.path)  # as `cp -p` leaves it: same size and times, a new file
    os.utime(tf.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert copies.path_for(tf, get("BC3")) != before


def test_a_full_disk_stops_the_copies_with_one_warning(tmp_path, caplog, monkeypatch):
    import errno

    from engine.streaming import served_copies

    def full(*args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(served_copies, "write_ktx2", full)
    copies = ServedCopies(tmp_path / "served")
    for name in ("a.ktx2", "b.ktx2"):
        out, _ = served(_bc7_file(tmp_path / name), {}, no_bptc, copies)
        assert isinstance(out, ServedFile)  # transcoded: the picture is there
        _wait(copies)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert copies.disabled and len(said) == 1
    assert "$ENGINE_CACHE" in said[0] and "continues without caching" in said[0]
