"""Runs only on a real GPU with ARB_sparse_texture and NVX_gpu_memory_info (the H200 device
machine); skips cleanly on llvmpipe."""
from __future__ import annotations

import time

import pytest
from streaming_helpers import make_textures, row_view, step

from engine.memory.governor import Governor
from engine.streaming.levels.streamer import LevelStreamer
from engine.memory.budget import Budget

pytestmark = pytest.mark.gpu


def test_sparse_backend_streams_under_budget(device, tmp_path):
    if not device.caps.sparse_texture:
        pytest.skip("driver has no ARB_sparse_texture")
    paths = make_textures(tmp_path, 12, 1024, "BC7")
    s = LevelStreamer(device, backend="sparse")
    gov = Governor(budget=Budget("1GiB"))
    try:
        for i, p in enumerate(paths):
            s.register(f"s{i}", p)
        device.ledger.reset_frame_peak()
        for f in range(240):
            step(device, gov, s, row_view(f, (8.0, 0.0, 2.5), 12, viewport=(1920, 1080)))
            smp = device.end_frame(f)
            assert smp.peak_bytes <= gov.budget_bytes
            time.sleep(0.001)
        st = s.stats()
        assert st.backend == "sparse" and st.loads > 0 and st.budget_violations == 0
        # the ledger counts committed pages: what the policy planned with, exactly
        assert device.ledger.category_total("texture.streamed") == st.resident_bytes
    finally:
        s.release()
