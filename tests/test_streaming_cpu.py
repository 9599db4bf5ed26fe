"""The streamer's per-frame CPU work (issue 11): the vectorised paths give exactly the numbers
and plans of the straightforward formulations they replaced, and the work skipped when inputs
repeat is only work whose result could not change.

The references below are the earlier code, kept here as oracles: a per-call estimate, three
separate estimates for prefetch, and the planning loop over every wanting texture."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.streaming.culling import frustum_planes, spheres_visible
from engine.streaming.levels.estimator import (
    CameraInput,
    InstanceArrays,
    MipEstimate,
    TextureArrays,
    estimate_mips,
    prepare_instances,
)
from engine.streaming.levels.fade import fade_min_lod
from engine.streaming.levels.ops import MipOp, Plan, step_peaks
from engine.streaming.levels.planner import _Planner, make_plan
from engine.streaming.levels.prefetch import (
    PrefetchConfig,
    estimate_with_prefetch,
    extrapolate_camera,
    predict_prefetch,
)
from engine.streaming.levels.state import (
    PolicyConfig,
    StreamerState,
    TextureSpec,
    TextureTable,
    apply_ops,
    resident_bytes,
    update_state,
)
from engine.streaming.tiers import Tier


# ---------------------------------------------------------------------------- oracles
def reference_estimate(instances: InstanceArrays, textures: TextureArrays, camera: CameraInput,
                       global_bias: float = 0.0) -> MipEstimate:
    centers = np.asarray(instances.centers, dtype=np.float64)
    radii = np.asarray(instances.radii, dtype=np.float64)
    tex = np.asarray(instances.texture, dtype=np.intp)
    levels = np.asarray(textures.levels, dtype=np.int32)
    visible = spheres_visible(frustum_planes(camera.view_proj), centers, radii)
    offset = centers - np.asarray(camera.position, dtype=np.float64)
    dist = np.maximum(np.sqrt(np.einsum("ij,ij->i", offset, offset)) - radii, camera.near)
    size = np.maximum(textures.width, textures.height).astype(np.float64)
    scale = 2.0 * np.tan(0.5 * camera.fovy) / (camera.viewport_height * camera.render_scale)
    with np.errstate(divide="ignore"):
        inst_mip = np.log2(np.asarray(instances.uv_density, dtype=np.float64) * size[tex]
                           * dist * scale)
    inst_mip += np.asarray(textures.bias, dtype=np.float64)[tex] + global_bias
    inst_mip[~visible] = np.inf
    mip = np.full(levels.shape[0], np.inf)
    np.minimum.at(mip, tex, inst_mip)
    tex_visible = np.isfinite(mip)
    mip = np.where(tex_visible, np.maximum(mip, 0.0), np.inf)
    top = np.maximum(levels - 1, 0)
    level = np.where(tex_visible, np.minimum(np.floor(np.minimum(mip, top)), top), top)
    return MipEstimate(mip=mip, level=level.astype(np.int32), visible=tex_visible,
                       instance_visible=visible)


_SEE_ALL = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], np.float64)


def reference_prefetch(instances, textures, now, prev=None, config=None,
                       global_bias=0.0) -> np.ndarray:
    config = config or PrefetchConfig()
    out = np.full(len(textures.levels), np.inf)
    if len(instances.radii) == 0:
        return out
    centers = np.asarray(instances.centers, np.float64)
    radii = np.asarray(instances.radii, np.float64)
    est_now = reference_estimate(instances, textures, now, global_bias)
    grown = InstanceArrays(centers, radii * config.neighbour_scale, instances.uv_density,
                           instances.texture)
    near = reference_estimate(grown, textures, now, global_bias).instance_visible
    near &= ~est_now.instance_visible
    if near.any():
        sub = InstanceArrays(centers[near], radii[near], np.asarray(instances.uv_density)[near],
                             np.asarray(instances.texture)[near])
        out = np.minimum(out, reference_estimate(sub, textures, replace(now, view_proj=_SEE_ALL),
                                                 global_bias).mip)
    if prev is not None and est_now.instance_visible.any():
        step = float(np.linalg.norm(np.asarray(now.position, np.float64)
                                    - np.asarray(prev.position, np.float64)))
        seen = centers[est_now.instance_visible]
        nearest = float(np.min(np.linalg.norm(seen - np.asarray(now.position), axis=1)))
        if 0.0 < step <= config.cut_ratio * nearest:
            ahead = extrapolate_camera(prev, now, config.ahead_frames)
            out = np.minimum(out, reference_estimate(instances, textures, ahead,
                                                     global_bias).mip)
    return out


def reference_plan(state: StreamerState, table: TextureTable, frame: int, pool: int,
                   config: PolicyConfig, ready: np.ndarray | None) -> Plan:
    """The tiered plan as it was made before: one Python importance tuple per wanting
    texture, a sort, and a loop visiting every one of them."""
    start = resident_bytes(state, table)
    planner = _Planner(state, table, pool, start, config, frame)
    requests, prefetch_requests, deferred = [], 0, 0
    assert start <= pool
    res = state.resident_base
    desired = state.desired(table)
    want = np.flatnonzero(res > desired)
    keys = [planner.importance(int(t), int(res[t]) - 1) for t in want]
    order = sorted(range(len(want)), key=keys.__getitem__, reverse=True)
    uploads = 0
    for i in order:
        t = int(want[i])
        up = int(table.storage[t, res[t] - 1] - table.storage[t, res[t]])
        if t in planner.evict_to or -keys[i][0] > Tier.PREFETCH:
            continue
        if ready is not None and not ready[t]:
            prefetch = -keys[i][0] > Tier.VISIBLE
            if len(requests) < config.max_requests and (
                    not prefetch or prefetch_requests < config.max_prefetch_requests):
                requests.append((t, int(res[t]) - 1))
                prefetch_requests += int(prefetch)
            continue
        capped = len(planner.entries) >= config.max_ops or (
            planner.loaded and uploads + up > config.max_upload_bytes)
        if capped or not planner.try_load(t):
            deferred += 1
            continue
        uploads += up
    unneeded = np.flatnonzero((state.unwanted_since >= 0) & (res < desired)
                              & (frame - state.unwanted_since >= config.evict_delay_frames))
    planner.voluntary_evictions(sorted(unneeded.tolist(),
                                       key=lambda t: planner.importance(t, int(res[t]))))
    ops = tuple(planner.ops(planner.entries, planner.evict_to))
    peaks = step_peaks(ops, start)
    return Plan(ops=ops, requests=tuple(requests), start_bytes=start, pool_bytes=pool,
                peak_bytes=max([start, *peaks]), end_bytes=start + sum(o.delta for o in ops),
                over_budget=False, deferred_loads=deferred, reserve_bytes=planner.reserve)


def reference_update_state(state, table, mip, visible, frame, config, prefetch_mip=None):
    """update_state as it was: a deep copy of the state (level times too), then in place."""
    new = state.copy()
    visible = np.asarray(visible, dtype=bool)
    new.last_visible[visible] = frame
    new.visible = visible.copy()
    tail = table.tail_base
    if prefetch_mip is None:
        new.prefetch_target = tail.astype(np.int32).copy()
    else:
        pm = np.asarray(prefetch_mip, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            lvl = np.floor(np.where(np.isfinite(pm), np.maximum(pm, 0.0), 0.0))
        lvl = np.clip(lvl + config.prefetch_offset, 0, tail).astype(np.int32)
        new.prefetch_target = np.where(np.isfinite(pm), lvl, tail).astype(np.int32)
    m = np.asarray(mip, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        raw = np.clip(np.floor(np.where(visible, m, 0.0)), 0, tail).astype(np.int32)
    h = config.hysteresis
    finer = visible & (m < state.target - h)
    coarser = visible & (m >= state.target + 1 + h)
    new.target = np.where(finer | coarser, raw, state.target).astype(np.int32)
    stale = ~visible & (frame - new.last_visible > config.recent_frames)
    new.target[stale] = tail[stale]
    unwanted = new.resident_base < new.desired(table)
    new.unwanted_since = np.where(
        unwanted, np.where(state.unwanted_since < 0, frame, state.unwanted_since), -1)
    return new


# ---------------------------------------------------------------------------- scenes
def random_scene(rng: np.random.Generator, n_inst: int, n_tex: int):
    centers = rng.normal(size=(n_inst, 3)) * rng.uniform(1, 40)
    inst = InstanceArrays(centers=centers.astype(np.float32),
                          radii=rng.uniform(0.1, 3.0, n_inst).astype(np.float32),
                          uv_density=rng.uniform(0.05, 2.0, n_inst).astype(np.float32),
                          texture=rng.integers(0, n_tex, n_inst))
    size = 2 ** rng.integers(4, 12, n_tex)
    tex = TextureArrays(width=size, height=size // 2 ** rng.integers(0, 2, n_tex),
                        levels=np.log2(size).astype(np.int32) + 1,
                        bias=rng.choice([0.0, 0.5, -1.0], n_tex))
    return inst, tex


def random_camera(rng: np.random.Generator) -> CameraInput:
    from pyglm import glm

    eye = glm.vec3(*rng.normal(size=3) * 20)
    target = glm.vec3(*rng.normal(size=3) * 5)
    fovy = float(rng.uniform(0.5, 1.4))
    vp = np.asarray(glm.perspective(fovy, 16 / 9, 0.1, 500.0) * glm.lookAt(
        eye, target, glm.vec3(0, 1, 0)), np.float64)
    return CameraInput(position=np.array(tuple(eye), np.float32), view_proj=vp, fovy=fovy,
                       viewport_height=int(rng.integers(100, 2200)),
                       render_scale=float(rng.choice([1.0, 0.75, 0.5])))


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical (NaN-aware; all these arrays are NaN-free anyway)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


# ---------------------------------------------------------------------------- estimator
@pytest.mark.parametrize("seed", range(12))
def test_prepared_estimate_is_bit_identical_to_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    inst, tex = random_scene(rng, int(rng.integers(1, 3000)), int(rng.integers(1, 500)))
    cam = random_camera(rng)
    bias = float(rng.choice([0.0, 0.5, -0.25]))
    want, got = reference_estimate(inst, tex, cam, bias), estimate_mips(inst, tex, cam, bias)
    assert want.visible.any() or seed > 8  # the scenes do put things in view
    for field in ("mip", "level", "visible", "instance_visible"):
        assert same(getattr(got, field), getattr(want, field)), field


@pytest.mark.parametrize("seed", range(12))
def test_fused_prefetch_is_bit_identical_to_three_estimates(seed: int) -> None:
    """One instance pass for the estimate, the neighbours and the nearest distance, a second
    for the camera ahead: the same numbers as the separate estimates, moving or still."""
    rng = np.random.default_rng(100 + seed)
    inst, tex = random_scene(rng, int(rng.integers(1, 3000)), int(rng.integers(1, 500)))
    now = random_camera(rng)
    step = rng.normal(size=3) * rng.choice([0.0, 0.05, 1.0])
    prev = replace(now, position=np.asarray(now.position, np.float64) - step,
                   view_proj=np.asarray(now.view_proj) - rng.normal(size=(4, 4)) * 1e-3)
    config = PrefetchConfig(neighbour_scale=float(rng.uniform(1.0, 4.0)))
    for p in (prev, now, None):
        est, mips = estimate_with_prefetch(prepare_instances(inst, tex), now, p, config, 0.5)
        assert same(mips, reference_prefetch(inst, tex, now, p, config, 0.5))
        assert same(est.mip, reference_estimate(inst, tex, now, 0.5).mip)
        assert same(predict_prefetch(inst, tex, now, p, config, 0.5), mips)


def test_prepared_instances_serve_many_cameras_without_changing() -> None:
    """The work memory a prepared set reuses never leaks into a result: an estimate made
    earlier is unchanged by later ones."""
    rng = np.random.default_rng(3)
    inst, tex = random_scene(rng, 2000, 300)
    prep = prepare_instances(inst, tex)
    cams = [random_camera(rng) for _ in range(4)]
    first = [estimate_with_prefetch(prep, c, None, None)[0].mip.copy() for c in cams]
    kept = [estimate_with_prefetch(prep, c, None, None)[0] for c in cams]
    for c, m, k in zip(cams, first, kept):
        assert same(k.mip, m)
        assert same(k.mip, reference_estimate(inst, tex, c).mip)


# ---------------------------------------------------------------------------- policy
def random_table(rng: np.random.Generator, count: int) -> TextureTable:
    specs = [TextureSpec("BC7_SRGB", int(s), int(s), int(s).bit_length())
             for s in 2 ** rng.integers(6, 12, count)]
    return TextureTable.build(specs)


@pytest.mark.parametrize("seed", range(30))
def test_vectorised_plan_matches_the_per_texture_loop(seed: int) -> None:
    """Random states, readiness and caps (small, so the loop's early exits are taken):
    ops, requests, deferrals and every figure of the plan equal the old loop's."""
    rng = np.random.default_rng(1000 + seed)
    count = int(rng.integers(1, 400))
    table = random_table(rng, count)
    state = StreamerState.initial(table)
    state.resident_base = np.minimum(rng.integers(0, 12, count), table.tail_base).astype(np.int32)
    frame = 500
    mip = np.where(rng.random(count) < 0.7, rng.uniform(0, 10, count), np.inf)
    visible = np.isfinite(mip) & (rng.random(count) < 0.9)
    state.last_visible = np.where(rng.random(count) < 0.8, rng.integers(380, 500, count), -1)
    prefetch = np.where(rng.random(count) < 0.3, rng.uniform(0, 8, count), np.inf)
    config = PolicyConfig(max_ops=int(rng.integers(0, 20)),
                          max_requests=int(rng.integers(0, 40)),
                          max_prefetch_requests=int(rng.integers(0, 6)),
                          max_upload_bytes=int(rng.choice([1 << 20, 64 << 20])),
                          evict_delay_frames=int(rng.choice([0, 30])))
    state = update_state(state, table, mip, visible, frame, config, prefetch)
    state.unwanted_since = np.where(state.unwanted_since >= 0,
                                    rng.integers(400, 501, count), -1)
    ready = None if seed % 5 == 0 else rng.random(count) < rng.uniform(0.05, 0.95)
    resident = resident_bytes(state, table)
    pool = int(resident + rng.integers(0, 3 * resident // 2 + 1))
    want = reference_plan(state, table, frame, pool, config, ready)
    got = make_plan(state, table, frame, pool, 0, config, ready)
    assert got == want


def test_update_state_leaves_its_input_alone_and_shares_only_the_level_times() -> None:
    rng = np.random.default_rng(9)
    table = random_table(rng, 50)
    state = update_state(StreamerState.initial(table), table, rng.uniform(0, 4, 50),
                         np.ones(50, bool), 0, PolicyConfig())
    before = state.copy()
    new = update_state(state, table, rng.uniform(0, 4, 50), rng.random(50) < 0.5, 1,
                       PolicyConfig(), rng.uniform(0, 4, 50))
    for name in ("resident_base", "target", "last_visible", "unwanted_since", "level_times",
                 "prefetch_target", "visible"):
        assert same(getattr(state, name), getattr(before, name)), name
    assert new.level_times is state.level_times  # no op ran: nothing to copy
    for name in ("resident_base", "target", "last_visible", "unwanted_since", "visible"):
        assert not np.shares_memory(getattr(new, name), getattr(state, name)), name
    # an op copies before writing: the earlier state's times stay what they were
    op_t = int(np.flatnonzero(new.resident_base > 0)[0])
    lvl = int(new.resident_base[op_t])
    after = apply_ops(new, [MipOp(op_t, lvl, lvl - 1, 0, 0)], 5.0)
    assert after.level_times[op_t, lvl - 1] == 5.0
    assert same(state.level_times, before.level_times)


@pytest.mark.parametrize("seed", range(6))
def test_fade_on_candidate_rows_equals_the_full_scan(seed: int) -> None:
    rng = np.random.default_rng(50 + seed)
    table = random_table(rng, 300)
    state = StreamerState.initial(table)
    loaded = np.full(300, -np.inf)
    for now in np.sort(rng.uniform(0, 10, 200)):
        t = int(rng.integers(0, 300))
        b = int(state.resident_base[t])
        if b > 0:
            state = apply_ops(state, [MipOp(t, b, b - 1, 0, 0)], float(now))
            loaded[t] = now
    for now in (5.0, 9.9, 10.2, 11.0, 30.0):
        window = state.level_times.shape[1] * 0.3
        rows = np.flatnonzero(loaded > now - window)
        assert same(fade_min_lod(state, now, 0.3, rows=rows), fade_min_lod(state, now, 0.3))


# ---------------------------------------------------------------------------- the streamer
def test_streamer_reuses_estimates_only_while_their_inputs_repeat(device, tmp_path) -> None:
    """Still frames reuse the last estimate; a moved camera, or instance arrays changed in
    place (as a scene updates them), recompute it. Every frame's estimate and prediction
    equal a fresh computation from that frame's view."""
    from streaming_helpers import make_textures, row_view

    from engine.streaming.levels.estimates import view_camera, view_instances
    from engine.streaming.levels.streamer import LevelStreamer

    s = LevelStreamer(device, backend="realloc", io_workers=0)
    try:
        for i, p in enumerate(make_textures(tmp_path, 6, 64)):
            s.register(f"t{i}", p)
        eyes = [(0.0, 0.0, 2.0)] * 3 + [(0.5, 0.0, 2.0), (1.0, 0.0, 1.5)] + [(1.0, 0.0, 1.5)] * 2
        views = [row_view(f, eye, 6) for f, eye in enumerate(eyes)]
        # the next frame's view shares the last one's arrays, one instance moved in place
        # (what a scene's incrementally updated arrays do)
        views.append(replace(views[-1], frame=len(views)))
        prev, computed = None, []
        for view in views:
            if view is views[-1]:
                view.centers[2] += (0.0, 0.0, 1.0)
            s.grant(1 << 30)
            before = s.estimates.entry
            s.begin_frame(view)
            s.end_frame()
            computed.append(s.estimates.entry is not before)
            cam = view_camera(view)
            est, mips = s.estimates.entry[1], s.estimates.entry[2]
            want_est, want_mips = estimate_with_prefetch(
                prepare_instances(view_instances(view), s._tex_arrays), cam, prev)
            assert same(est.mip, want_est.mip) and same(mips, want_mips)
            prev = cam
        # frame 0 computes; frame 1 has a new previous camera (prefetch reads it); frame 2
        # repeats everything; 3 and 4 move; 5 has a new previous camera again, 6 repeats;
        # 7 is 6's arrays with an instance moved in place
        assert computed == [True, True, False, True, True, True, False, True]
    finally:
        s.release()


@pytest.mark.parametrize("seed", range(20))
def test_update_state_matches_the_copying_version(seed: int) -> None:
    """Random mips (inf, negative, huge), visibility, prefetch (with offsets of either sign
    or none), hysteresis and recency, over a few frames: the same state field by field."""
    rng = np.random.default_rng(200 + seed)
    count = int(rng.integers(1, 300))
    table = random_table(rng, count)
    config = PolicyConfig(prefetch_offset=int(rng.choice([0, 0, 1, 2, -1])),
                          hysteresis=float(rng.choice([0.0, 0.25, 0.6])),
                          recent_frames=int(rng.choice([0, 3, 120])))
    state = want = StreamerState.initial(table)
    for frame in range(6):
        mip = np.where(rng.random(count) < 0.2, rng.choice([np.inf, -3.0, 40.0, 0.0], count),
                       rng.uniform(-1, 12, count))
        visible = rng.random(count) < 0.6
        pm = None if rng.random() < 0.3 else np.where(rng.random(count) < 0.5, np.inf,
                                                       rng.uniform(-2, 12, count))
        state = update_state(state, table, mip, visible, frame, config, pm)
        want = reference_update_state(want, table, mip, visible, frame, config, pm)
        for name in ("resident_base", "target", "last_visible", "unwanted_since",
                     "level_times", "prefetch_target", "visible"):
            assert same(getattr(state, name), getattr(want, name)), (frame, name)
        # residency moves as the executor would move it, so unwanted detail appears
        ops = [MipOp(int(t), int(state.resident_base[t]), int(state.resident_base[t]) - 1, 0, 0)
               for t in np.flatnonzero(state.resident_base > 0)[:5]]
        state, want = apply_ops(state, ops, frame), apply_ops(want, ops, frame)
