"""Randomized stress of virtual texturing: random allowances, random cameras, feedback-driven
residency. Every frame: no allocation above the allowance in force, every page-table entry
names a resident ancestor-or-self tile (the finest one), pinned tiles stay; at the end no
GL object is left."""
from __future__ import annotations

import numpy as np
import pytest
from vt_helpers import chain_file, wait_tiled

from engine.gl.vt import QuadBatch
from engine.streaming.virtual.pagetable import TABLE_WIDTH
from engine.streaming.virtual.quads import QuadRenderer, view_projection, wall
from engine.streaming.virtual.system import VirtualTextureSystem
from engine.streaming.virtual.tiles import TAIL_FLAG, slot_bytes, unpack_entry

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("isolated_cache")]


def check_table(vts: VirtualTextureSystem) -> None:
    """Each entry = the finest resident tile among the tile itself and its ancestors."""
    pol = vts.policy
    for vt, tex in enumerate(vts.textures):
        lay = tex.layout
        assert (lay.levels - 1, 0, 0) in tex.resident
        dense = vts.table.dense(vt)  # what the shader reads, through the level words
        for level in range(lay.levels):
            gx, gy = lay.grid(level)
            slots, held = unpack_entry(dense[level].ravel())
            for i in range(gx * gy):
                x, y = i % gx, i // gx
                want = next(lv for lv in range(level, lay.levels)
                            if (lv, x >> (lv - level), y >> (lv - level)) in tex.resident)
                assert int(held[i]) == want
                k = want - level
                key = vts.key(vt, want, x >> k, y >> k)
                slot = int(slots[i])
                if slot & TAIL_FLAG:  # a packed small level in its cell
                    assert vts.cell_key(slot & ~TAIL_FLAG) == key
                else:
                    assert int(pol.slot_key[slot - vts.tail_slots]) == key


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_random_budgets_and_cameras(dev, tmp_path_factory, seed):
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("vtstress")
    sizes = [256, 512, 512, 1024, 256, 512]
    paths = [chain_file(d, f"s{i}_{s}.ktx2", s, seed=40 + i) for i, s in enumerate(sizes)]
    size = (160, 120)
    slot = 136 * 136
    with dev.leak_check():
        renderer = QuadRenderer(dev, size)
        vts = VirtualTextureSystem(dev, 2 << 20, max_uploads=int(rng.integers(4, 40)),
                                   hold_frames=int(rng.integers(0, 6)),
                                   latency_ms=(0.0, 3.0))
        quads = None
        try:
            ids = [vts.register(p, wrap=str(rng.choice(["repeat", "clamp"]))) for p in paths]
            wait_tiled(vts)  # the stress runs on the default storage
            quads = QuadBatch(dev, wall(3, 2, ids, size=1.0, gap=0.1,
                                        uv_scale=float(rng.choice([1.0, 2.0]))))
            vts.update()
            baseline = None
            allowance = vts.allowance
            for frame in range(40):
                old = allowance
                if frame % 7 == 3:
                    # From "pinned tiles and a few more" to several MiB.
                    allowance = int(rng.integers(TABLE_WIDTH * 4 * 2 + slot * 8, 5 << 20))
                    vts.set_allowance(allowance)
                if frame == 0:
                    dev.ledger.reset_frame_peak()
                eye = (float(rng.uniform(-2, 2)), float(rng.uniform(-1, 1)),
                       float(rng.uniform(0.3, 3.0)))
                target = (float(rng.uniform(-1, 1)), float(rng.uniform(-0.5, 0.5)), 0.0)
                vp = view_projection(eye, target, size[0] / size[1])
                vts.begin_frame(frame)
                vts.update()
                renderer.draw_virtual(vts, quads, vp)
                renderer.draw_feedback(vts, quads, vp, frame)
                sample = dev.end_frame(frame)
                assert vts.nbytes <= allowance
                assert vts.policy.occupied <= vts.cache.slots
                if baseline is None and frame >= 2:
                    baseline = sample.total_bytes - vts.nbytes
                if baseline is not None:
                    assert sample.peak_bytes - baseline <= max(old, allowance)
                check_table(vts)
            assert sum(s.tiles_uploaded for s in vts.history) > 0
            assert (vts.resident_tiles() - len(vts.tails)) * slot_bytes(vts.fmt) <= vts.allowance
            assert len(vts.tails) == len(paths)  # each coarsest level, pinned in a cell
        finally:
            if quads is not None:
                quads.release()
            renderer.release()
            vts.release()
