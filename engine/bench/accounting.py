"""Ledger bytes against the driver's own figure (NVX) for textures and framebuffers a draw
has touched. On drivers without a memory-info extension (llvmpipe) the driver side is n/a."""
from __future__ import annotations

import logging

from ..memory.sizes import format_bytes, level_bytes, mip_count, mip_dims
from .common import SuiteResult, TextureToucher, random_blocks

log = logging.getLogger(__name__)


def run(device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("accounting")
    count, size = (8, 1024) if quick else (64, 2048)
    target_size = (1920, 1080) if quick else (3840, 2160)
    toucher = TextureToucher(device)
    toucher.touch([])
    before = device.vram()
    ledger_before = device.ledger.total
    made = []
    try:
        levels = mip_count(size, size)
        for i in range(count):
            tex = device.storage_texture("BC7_SRGB", size, size, levels=levels,
                                         category="texture.streamed", label=f"acct-{i}")
            made.append(tex)
            for lvl in range(levels):
                w, h = mip_dims(size, size, lvl)
                device.upload(tex, lvl, random_blocks(level_bytes("BC7", w, h), i))
        for i in range(4):
            color = device.texture(target_size, 4, dtype="f2", category="target",
                                   label=f"acct-hdr-{i}")
            depth = device.depth_texture(target_size, label=f"acct-depth-{i}")
            fbo = device.framebuffer([color], depth, label=f"acct-fbo-{i}")
            made += [fbo, color, depth]
            fbo.use()
            fbo.clear(0.1, 0.2, 0.3, 1.0, depth=1.0)
        toucher.touch([t for t in made if hasattr(t, "chain_width")])
        after = device.vram()
        ledger_delta = device.ledger.total - ledger_before
        row = {"textures": count, "texture_size": size, "targets": f"4x RGBA16F+depth "
               f"{target_size[0]}x{target_size[1]}", "ledger_bytes": ledger_delta,
               "driver_source": after.source}
        if before.available_bytes is not None and after.available_bytes is not None:
            driver_delta = before.available_bytes - after.available_bytes
            row["driver_bytes"] = driver_delta
            row["driver_over_ledger"] = driver_delta / ledger_delta if ledger_delta else None
        result.rows.append(row)
        result.notes.append(f"ledger {format_bytes(ledger_delta)}; driver "
                            f"{format_bytes(row.get('driver_bytes'))} ({after.source or 'n/a'})")
    finally:
        for obj in reversed(made):
            device.release(obj)
        toucher.release()
    return result
