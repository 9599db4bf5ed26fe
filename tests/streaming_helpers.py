"""Helpers for streamer tests: small KTX2 files, camera FrameViews without a renderer, and
workers on threads."""
from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pyglm import glm

from engine.memory.sizes import level_bytes, mip_count, mip_dims
from engine.streaming.contract import FrameView
from engine.textures.ktx2_write import write_ktx2


def make_textures(folder: Path, count: int, size: int = 256, fmt: str = "BC1_RGBA") -> list[Path]:
    """`count` KTX2 files of random (valid-sized) blocks: content is irrelevant to residency."""
    rng = np.random.default_rng(7)
    paths = []
    n = mip_count(size, size)
    for i in range(count):
        levels = [rng.integers(0, 256, level_bytes(fmt, *mip_dims(size, size, lvl)),
                               dtype=np.uint8).tobytes() for lvl in range(n)]
        p = folder / f"tex{i:03d}.ktx2"
        write_ktx2(p, fmt, size, size, levels)
        paths.append(p)
    return paths


def row_view(frame: int, eye: tuple[float, float, float], count: int,
             viewport: tuple[int, int] = (320, 240), scale: float = 1.0) -> FrameView:
    """Quads of 1 world unit in a row along +x at z=0, the camera at `eye` looking along -z."""
    view = glm.lookAt(glm.vec3(*eye), glm.vec3(eye[0], eye[1], 0.0), glm.vec3(0, 1, 0))
    fovy = np.radians(60.0)
    proj = glm.perspective(fovy, viewport[0] / viewport[1], 0.1, 500.0)
    centers = np.stack([np.arange(count) * 1.5, np.zeros(count), np.zeros(count)], 1)
    return FrameView(frame=frame, time=frame / 60.0, camera_pos=np.array(eye, np.float32),
                     view=np.asarray(view, np.float32), proj=np.asarray(proj, np.float32),
                     fovy=float(fovy), viewport=viewport, render_scale=scale,
                     centers=centers.astype(np.float32),
                     radii=np.full(count, 0.71, np.float32),
                     uv_density=np.ones(count, np.float32),
                     texture_ids=np.stack([np.arange(count), -np.ones(count, int),
                                           -np.ones(count, int)], 1).astype(np.int32))


def step(device, governor, streamer, view: FrameView, end: bool = True) -> None:
    """One frame of a bare streamer as the frame loop drives it: the governor splits the
    budget from the ledger and grants the pool, then the streamer plans and executes."""
    streamer.grant(governor.split(device.ledger.by_category()).pool_allowance)
    streamer.begin_frame(view)
    if end:
        streamer.end_frame()


def run_threads(worker: Callable[[int], None], count: int) -> list[BaseException]:
    """Run `worker(0)` ... `worker(count - 1)` on threads at once and wait for them all; what
    they raised (an error in a thread would otherwise only be printed)."""
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            worker(seed)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
