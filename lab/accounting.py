"""Ledger bytes against the driver's own figure (NVX) for textures and framebuffers a draw
has touched, phase by phase (textures first, then render targets) so any driver overhead is
attributed. On drivers without a memory-info extension (llvmpipe) the driver side is n/a."""
from __future__ import annotations

import logging

from engine.formats import get as get_format
from engine.memory.ledger import Category
from engine.memory.sizes import format_bytes, level_bytes, mip_count, mip_dims
from engine.textures.transcode import served_format
from .common import SuiteResult, TextureToucher, random_blocks

log = logging.getLogger(__name__)


def _phase(device, name: str, make, toucher: TextureToucher) -> tuple[dict, list]:
    """Run `make()` (returns the objects made and the textures to sample), draw, compare."""
    before, ledger_before = device.vram(), device.ledger.total
    made, sampled = make()
    toucher.touch(sampled)
    after = device.vram()
    row = {"phase": name, "ledger_bytes": device.ledger.total - ledger_before,
           "driver_source": after.source}
    if before.available_bytes is not None and after.available_bytes is not None:
        row["driver_bytes"] = before.available_bytes - after.available_bytes
        row["driver_over_ledger"] = (row["driver_bytes"] / row["ledger_bytes"]
                                     if row["ledger_bytes"] else None)
    return row, made


def run(device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("accounting")
    count, size = (8, 1024) if quick else (64, 2048)
    target_size = (1920, 1080) if quick else (3840, 2160)
    toucher = TextureToucher(device)
    toucher.touch([])
    made: list = []

    # what the driver holds BC7 in (BC3, the same blocks, where it has no BPTC)
    fmt = served_format(get_format("BC7_SRGB"), device.caps.can_sample)

    def textures():
        levels = mip_count(size, size)
        out = []
        for i in range(count):
            tex = device.storage_texture(fmt, size, size, levels=levels,
                                         category=Category.STREAMED, label=f"acct-{i}")
            out.append(tex)
            for lvl in range(levels):
                w, h = mip_dims(size, size, lvl)
                device.commands.upload(tex, lvl, random_blocks(level_bytes(fmt, w, h), i))
        return out, out

    def targets():
        out = []
        for i in range(4):
            color = device.texture(target_size, 4, dtype="f2", category=Category.TARGET,
                                   label=f"acct-hdr-{i}")
            depth = device.depth_texture(target_size, label=f"acct-depth-{i}")
            fbo = device.framebuffer([color], depth, label=f"acct-fbo-{i}")
            out += [fbo, color, depth]
            fbo.use()
            fbo.clear(0.1, 0.2, 0.3, 1.0, depth=1.0)
        return out, []

    try:
        for name, make in ((f"{count}x {fmt.name} {size}^2 full chains", textures),
                           (f"4x RGBA16F+depth24 {target_size[0]}x{target_size[1]}", targets)):
            row, objs = _phase(device, name, make, toucher)
            made += objs
            result.rows.append(row)
            result.notes.append(f"{name}: ledger {format_bytes(row['ledger_bytes'])}, driver "
                                f"{format_bytes(row.get('driver_bytes'))} "
                                f"({row['driver_source'] or 'n/a'})")
    finally:
        for obj in reversed(made):
            device.release(obj)
        toucher.release()
    return result
