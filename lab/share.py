"""Processes sharing one group budget: `python -m lab.share run --out DIR`.

A coordinator starts small headless members of one share group (the gallery, streaming, at a
tiny size) and moves the group through joins and leaves: three members of weight 1, a fourth
of weight 2 joins, it leaves cleanly, one member is killed with SIGKILL, a modest member (one
that wants less than its share) joins. Optionally an outsider process (`--outsider CMD`, the
device script's PyTorch allocator) takes and frees GPU memory meanwhile. Every member writes
one JSON line per frame (monotonic time, ledger total and frame peak, share, grant, effective
budget, claim); the coordinator reads them back and reports, per phase, how long each member
took to reach its share, and over all frames whether the group's summed memory ever exceeded
the group budget (summed conservatively from every member's ledger: `group_sums`) and
whether any member exceeded its effective budget. The members that join later start with the
first ones and wait for their turn, so a phase times the join, not a process start.

    python -m lab.share run --out out/share            # 20-40 s on llvmpipe
    python -m lab.share cost                            # one exchange, microseconds
    python -m lab.share views                           # two views on one device
    python -m lab.share member --group g --log m.jsonl ...   # one member (internal)
"""
from __future__ import annotations

import argparse
import bisect
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.cli_args import budget_arg
from engine.cli_args import positive_int as positive_int_arg
from engine.inputs import checked, positive_int

log = logging.getLogger(__name__)

#: The member scene: the gallery at a tiny size, wanting far more detail than it can have
#: (a negative mip bias), so every greedy member's demand exceeds its share; the camera
#: barely moves, so a member's demand stays put while the group changes around it.
SCENE = {"count": 24, "texture_size": 512, "speed": 0.01}
SIZE = (96, 64)
GREEDY_BIAS = -6.0
MODEST_BIAS = 0.0
#: Frames a member draws before a phase starts timing it: llvmpipe compiles shaders in the
#: first frames (seconds each on a loaded machine), which is not the share's reaction.
WARM_FRAMES = 5


# ---------------------------------------------------------------------------- member side
def member(args: argparse.Namespace) -> int:
    from engine.app.loop import FrameLoop, make_governor
    from engine.app.settings import RunSettings
    from engine.demos.gallery import build
    from engine.gl.device import Device
    from engine.memory.shares import ShareSettings
    from engine.streaming.settings import StreamerSettings

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *a: stop.update(now=True))
    out = open(args.log, "a", buffering=1, encoding="utf-8")  # a line per frame, flushed

    def emit(t: float | None = None, **kw: Any) -> None:
        stamp = time.monotonic() if t is None else t
        out.write(json.dumps({"t": stamp, "pid": os.getpid(), **kw}) + "\n")

    size = tuple(args.size)
    scene = dict(SCENE, count=args.count, texture_size=args.texture_size)
    settings = RunSettings(
        size=size, provider="streaming", budget=args.budget,
        streamer=StreamerSettings(staging_bytes=256 << 10, virtual="off", mip_bias=args.bias),
        share=ShareSettings(args.group, weight=args.weight, floor=args.floor),
        options=dict(scene, cache_dir=args.cache) if args.cache else scene)
    device = Device.headless()
    try:
        while args.go is not None and not args.go.exists() and not stop["now"]:
            time.sleep(0.01)  # started ahead (imports, context) and told when to join
        governor = make_governor(device, settings)
        emit(event="joined", weight=args.weight, grant=governor.share.grant)
        loop = FrameLoop(device, governor, build, settings, size=size)
        try:
            frame, deadline = 0, time.monotonic() + args.seconds
            interval = 1.0 / args.fps if args.fps else 0.0
            while not stop["now"] and time.monotonic() < deadline:
                started = time.monotonic()
                rec = loop.step(frame)
                share = governor.share
                emit(event="frame", frame=frame, total=rec["total_bytes"],
                     peak=rec["peak_bytes"], grant=share.grant, share=share.share,
                     reserved=share.reserved, floor=share.claim.floor,
                     demand=share.claim.demand, peers=share.peers, tx=share.exchanged_at,
                     effective=rec.get("effective_budget_bytes"),
                     over=bool(rec.get("over_budget")), weight=args.weight,
                     pressure=rec.get("external_pressure_bytes"), ms=rec["ms"])
                frame += 1
                time.sleep(max(0.0, started + interval - time.monotonic()))
        finally:
            loop.release()  # frees its memory, then leaves the group
        # when its row went: from then on the others may grow into what it held (the line is
        # written later, and a loaded machine can make that much later)
        emit(t=getattr(governor.share, "left_at", None), event="left",
             total=device.ledger.total)
    finally:
        device.shutdown()
        out.close()
    return 0


# ---------------------------------------------------------------------------- coordinator
@dataclass
class Member:
    name: str
    weight: float
    bias: float
    proc: subprocess.Popen
    log: Path
    started: float
    killed: float | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)

    def read(self) -> list[dict[str, Any]]:
        if self.log.exists():
            text = self.log.read_text(encoding="utf-8")
            self.lines = [json.loads(ln) for ln in text.splitlines() if ln.endswith("}")]
        return self.lines

    def frames(self) -> list[dict[str, Any]]:
        return [ln for ln in self.read() if ln["event"] == "frame"]


@dataclass
class Group:
    """The coordinator's handle on one group and its members."""

    out: Path
    name: str
    budget: int
    floor: int
    seconds: float
    cache: Path | None
    #: the members' output size, texture count and texture edge
    scene: tuple[tuple[int, int], int, int] = (SIZE, SCENE["count"], SCENE["texture_size"])
    #: the members' frame rate, as a display would pace them; None: as fast as they draw
    fps: int | None = None
    members: dict[str, Member] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)

    def spawn(self, name: str, weight: float, bias: float = GREEDY_BIAS,
              ahead: bool = False) -> Member:
        """Start member `name`; `ahead`: it starts now but joins only at `go(name)`, so a
        phase's join is not held up by the process's start."""
        path = self.out / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        go = self.out / f"{name}.go"
        go.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "lab.share", "member", "--group", self.name,
               "--budget", str(self.budget), "--weight", str(weight), "--floor",
               str(self.floor), "--bias", str(bias), "--seconds", str(self.seconds),
               "--log", str(path), "--size", *map(str, self.scene[0]),
               "--count", str(self.scene[1]), "--texture-size", str(self.scene[2])] + \
            (["--cache", str(self.cache)] if self.cache else []) + \
            (["--go", str(go)] if ahead else []) + \
            (["--fps", str(self.fps)] if self.fps else [])
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                stderr=open(self.out / f"{name}.err", "w"))
        m = Member(name, weight, bias, proc, path, time.monotonic())
        self.members[name] = m
        self.event("spawn", name)
        return m

    def go(self, name: str) -> None:
        (self.out / f"{name}.go").touch()
        self.event("go", name)

    def event(self, what: str, name: str) -> None:
        self.events.append({"t": time.monotonic(), "event": what, "member": name})

    def wait_frames(self, names: Sequence[str], count: int = 1, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(len(self.members[n].frames()) >= count for n in names):
                return
            for n in names:
                if self.members[n].proc.poll() is not None:
                    raise RuntimeError(f"member {n} exited early: "
                                       f"{(self.out / f'{n}.err').read_text()[-2000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"members {list(names)} drew no frame within {timeout:.0f} s")

    def stop(self, name: str) -> None:
        m = self.members[name]
        m.proc.send_signal(signal.SIGTERM)
        m.proc.wait(timeout=30)
        self.event("left", name)

    def kill(self, name: str) -> None:
        m = self.members[name]
        m.killed = time.monotonic()  # before the signal: it may die at once
        m.proc.kill()
        m.proc.wait(timeout=30)
        self.event("killed", name)

    def close(self) -> None:
        for m in self.members.values():
            if m.proc.poll() is None:
                m.proc.send_signal(signal.SIGTERM)
        for m in self.members.values():
            try:
                m.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait()


def expected_shares(group: Group, names: Sequence[str], at: float) -> dict[str, int]:
    """The shares `fair_shares` gives the members `names` from their claims as last
    published before `at` (floors and demands as each member's newest frame saw them)."""
    from engine.memory.shares import Claim, fair_shares

    claims = []
    for n in names:
        m = group.members[n]
        rows = [f for f in m.frames() if f["t"] <= at] or m.frames()[:1]
        claims.append(Claim(m.weight, rows[-1].get("floor", 0), rows[-1].get("demand", 0)))
    return dict(zip(names, fair_shares(group.budget, claims)))


def settle_time(group: Group, names: Sequence[str], since: float,
                target: dict[str, float], tolerance: float = 0.10,
                key: str = "grant") -> float | None:
    """Seconds after `since` from which every member's `key` stays within `tolerance` of
    its target until the end of the window; None when it never does."""
    times = []
    for n in names:
        rows = [f for f in group.members[n].frames() if f["t"] >= since]
        good_from = None
        for f in rows:
            ok = abs(f[key] - target[n]) <= tolerance * target[n]
            if ok and good_from is None:
                good_from = f["t"]
            elif not ok:
                good_from = None
        if good_from is None:
            return None
        times.append(good_from - since)
    return max(times) if times else None


def window(group: Group, names: Sequence[str], start: float, end: float) -> Group:
    """A view of `group` whose members keep only their frames in [start, end]."""
    view = Group(group.out, group.name, group.budget, group.floor, group.seconds, group.cache,
                 group.scene, group.fps)
    for n in names:
        m = group.members[n]
        copy = Member(m.name, m.weight, m.bias, m.proc, m.log, m.started, m.killed)
        copy.lines = [f for f in m.read() if start <= f["t"] <= end]
        copy.read = lambda c=copy: c.lines  # type: ignore[method-assign]
        view.members[n] = copy
    return view


def group_sums(group: Group) -> dict[str, Any]:
    """The group's summed memory, conservatively, at every instant a member exchanged or
    ended a frame. A member counts, between its previous frame's end and its exchange, what
    it held at that end (nothing is allocated there but the renderer's per-frame buffers, sized
    on the first frame), and from its exchange to its frame's end, that frame's ledger peak;
    from its join to its first frame, that frame's peak; after its last frame, the larger of
    its last peak and its last reservation, until it left, or, when killed, until the first
    exchange of another member that no longer saw it (the kernel frees a process's memory
    before its pid turns into the zombie that exchange tests for)."""
    logs = {n: m.read() for n, m in group.members.items()}
    frames = {n: [ln for ln in lines if ln["event"] == "frame"] for n, lines in logs.items()}
    spans = {}
    for n, lines in logs.items():
        joined = next((ln["t"] for ln in lines if ln["event"] == "joined"), None)
        left = next((ln["t"] for ln in lines if ln["event"] == "left"), None)
        end = left if left is not None else float("inf")
        killed = group.members[n].killed
        if killed is not None:
            end = min((f["tx"] for k, fs in frames.items() if k != n
                       for prev, f in zip(fs, fs[1:])
                       if f["tx"] >= killed and f["peers"] < prev["peers"]),
                      default=float("inf"))
        spans[n] = (joined, end)

    ends = {n: [f["t"] for f in fs] for n, fs in frames.items()}

    def bound(n: str, t: float) -> int:
        fs = frames[n]
        i = bisect.bisect_left(ends[n], t)  # the first frame ending at or after t
        if i == len(fs):
            return max(fs[-1]["peak"], fs[-1]["reserved"])
        if i > 0 and t <= fs[i]["tx"]:
            return fs[i - 1]["total"]
        return fs[i]["peak"]

    instants = sorted({f[k] for fs in frames.values() for f in fs for k in ("t", "tx")})
    worst, worst_t, over, parts = 0, None, 0, {}
    for t in instants:
        now = {n: bound(n, t) for n, fs in frames.items()
               if fs and spans[n][0] is not None and spans[n][0] <= t <= spans[n][1]}
        total = sum(now.values())
        if total > worst:
            worst, worst_t, parts = total, t, now
        over += total > group.budget
    member_over = sum(1 for fs in frames.values() for f in fs
                      if f["effective"] is not None and f["total"] > f["effective"])
    return {"instants": len(instants), "group_over_instants": over, "max_sum_bytes": worst,
            "max_sum_at": worst_t, "max_sum_parts": parts,
            "member_frames_over_effective": member_over,
            "frames": {n: len(fs) for n, fs in frames.items()}}


def scenario(out: Path, *, budget: int, floor: int, hold: float = 2.5,
             cache: Path | None = None, outsider: Sequence[str] | None = None,
             size: tuple[int, int] = SIZE, count: int = SCENE["count"],
             texture_size: int = SCENE["texture_size"],
             fps: int | None = None) -> dict[str, Any]:
    """The join / leave / kill / modest-member run described in the module docstring;
    `fps` paces the members (a shared CI machine's cores are not spent on unseen frames)."""
    if fps is not None:
        fps = checked("fps", positive_int, fps)  # as --fps: a whole number, 1 or more
    out.mkdir(parents=True, exist_ok=True)
    from engine.demos.gallery_assets import gallery_textures
    # Made once, before the members start, so none of them bakes.
    gallery_textures(count, texture_size, "bc7", cache_dir=cache, progress=False)
    group = Group(out, f"bench-{uuid.uuid4().hex[:12]}", budget, floor,
                  seconds=hold * 8 + 60, cache=cache, scene=(size, count, texture_size),
                  fps=fps)
    sampler = NvmlSampler(out / "nvml.jsonl") if outsider else None
    phases: list[dict[str, Any]] = []
    other = None
    try:
        if outsider:
            other = subprocess.Popen(list(outsider), stdout=open(out / "outsider.log", "w"),
                                     stderr=subprocess.STDOUT)
            assert sampler is not None
            sampler.start()
        for n in "abc":
            group.spawn(n, 1.0)
        group.spawn("d", 2.0, ahead=True)
        group.spawn("e", 1.0, MODEST_BIAS, ahead=True)
        group.wait_frames("abc", WARM_FRAMES)

        def phase(name: str, live: str, since: float) -> None:
            time.sleep(hold)
            end = time.monotonic()
            view = window(group, live, since, end)
            target = expected_shares(view, live, end)
            by_weight = {n: budget * group.members[n].weight /
                         sum(group.members[k].weight for k in live) for n in live}
            last = {n: view.members[n].frames()[-1] if view.members[n].frames() else {}
                    for n in live}
            phases.append({
                "phase": name, "members": list(live),
                "expected_share_bytes": target, "weighted_share_bytes": by_weight,
                "grant_bytes": {n: last[n].get("grant") for n in live},
                "total_bytes": {n: last[n].get("total") for n in live},
                "grant_settle_s": settle_time(view, live, since, target),
                "usage_reach_s": settle_time(view, live, since, target, 0.10, "total"),
            })

        phase("three", "abc", time.monotonic())
        group.go("d")
        group.wait_frames("d", WARM_FRAMES)
        phase("d joined", "abcd", group.members["d"].frames()[WARM_FRAMES - 1]["t"])
        group.stop("d")
        phase("d left", "abc", group.events[-1]["t"])
        group.kill("c")
        phase("c killed", "ab", group.events[-1]["t"])
        group.go("e")
        group.wait_frames("e", WARM_FRAMES)
        phase("modest e joined", "abe", group.members["e"].frames()[WARM_FRAMES - 1]["t"])
    finally:
        group.close()
        if sampler is not None:
            sampler.stop()
        if other is not None:
            try:
                other.wait(timeout=30)
            except subprocess.TimeoutExpired:
                other.kill()
                other.wait()
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "host": {"cpus": os.cpu_count(), "platform": sys.platform},
              "scene": {"size": list(size), "count": count, "texture_size": texture_size},
              "group": group.name, "budget_bytes": budget, "floor_bytes": floor,
              "hold_s": hold, "fps": fps, "phases": phases, "sums": group_sums(group),
              "events": group.events,
              "nvml": None if sampler is None else sampler.summary(
                  other.pid if other is not None else None,
                  {m.proc.pid for m in group.members.values()}),
              "frame_ms_p50": {n: _median([f["ms"] for f in m.frames()])
                               for n, m in group.members.items()}}
    (out / "share.json").write_text(json.dumps(result, indent=1))
    return result


class NvmlSampler:
    """NVML's list of the GPU's processes every `every_s` seconds, on a thread, one JSON line
    each: who holds what while the group runs beside an outsider."""

    def __init__(self, path: Path, every_s: float = 0.5) -> None:
        import threading

        self.path, self.every_s = path, every_s
        self.samples: list[dict[str, Any]] = []
        self.reason: str | None = None
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)

    def start(self) -> None:
        self._worker.start()

    def _run(self) -> None:
        from engine.memory.nvml import NvmlProbe, NvmlReading, NvmlUnavailable

        probe = NvmlProbe.open(0)
        if isinstance(probe, NvmlUnavailable):
            self.reason = probe.reason
            return
        with probe, open(self.path, "w", encoding="utf-8") as out:
            while not self._stop.wait(self.every_s):
                reading = probe.read()
                if not isinstance(reading, NvmlReading):
                    continue
                sample = {"t": time.monotonic(), "free": reading.free_bytes,
                          "used": reading.used_bytes,
                          "processes": [{"pid": p.pid, "name": p.name, "bytes": p.used_bytes}
                                        for p in reading.others]}
                self.samples.append(sample)
                out.write(json.dumps(sample) + "\n")

    def stop(self) -> None:
        self._stop.set()
        self._worker.join(timeout=5)

    def summary(self, outsider: int | None, members: set[int]) -> dict[str, Any]:
        """What NVML said about the outsider (by pid) and about the group's members."""
        if self.reason is not None:
            return {"available": False, "reason": self.reason}
        seen = [p for s in self.samples for p in s["processes"] if p["pid"] == outsider]
        return {"available": True, "samples": len(self.samples),
                "outsider_pid": outsider,
                "outsider_names": sorted({p["name"] for p in seen}),
                "outsider_max_bytes": max((p["bytes"] or 0 for p in seen), default=None),
                "members_seen": sorted({p["pid"] for s in self.samples
                                        for p in s["processes"] if p["pid"] in members}),
                "min_free_bytes": min((s["free"] for s in self.samples), default=None)}


def exchange_cost(members: int = 4, repeats: int = 2000) -> dict[str, Any]:
    """Microseconds one exchange costs (a frame pays one), medians of `repeats`: a seat on a
    `ViewShares` and a seat in a group file with `members` members (all in this process: the
    lock, the read of every row, the liveness check of each and the write are the same)."""
    from engine.memory.group import join_group
    from engine.memory.shares import ShareSettings, ViewShares

    views = ViewShares(1 << 30)
    seats = [views.join(ShareSettings(views)) for _ in range(members)]
    view_us = _median_us(repeats, lambda: seats[0].exchange(1 << 20, 1 << 40, 1 << 20))
    name = f"cost-{uuid.uuid4().hex[:12]}"
    group = [join_group(ShareSettings(name), 1 << 30) for _ in range(members)]
    try:
        group_us = _median_us(repeats, lambda: group[0].exchange(1 << 20, 1 << 40, 1 << 20))
    finally:
        for m in group:
            m.leave()
    return {"members": members, "repeats": repeats, "view_exchange_us": view_us,
            "group_exchange_us": group_us}


def one_device(*, budget: int = 4 << 20, frames: int = 48, hide: tuple[int, int] = (16, 32),
               cache: Path | None = None, repeats: int = 20000) -> dict[str, Any]:
    """Two views of different scenes (the gallery, weight 1; the glTF box, weight 2) drawing
    with one headless device on one `ViewShares`, the box hidden for frames `hide[0]` to
    `hide[1]`: the time each frame's exchange takes (both views), the device's peak over
    every frame against the budget, how many frames the gallery's grant and its bytes take
    to follow the hide, and how many the box's grant takes to come back when shown. Also
    the ledger's cost of attribution: an add and remove with and without an owner's scope,
    and the figures a governor reads (`by_category`) for an owner and for the device."""
    from engine.app.loop import FrameLoop
    from engine.demos import gallery, gltf_demo
    from engine.gl.hosts import headless_device, made_current
    from engine.memory.ledger import Ledger
    from engine.memory.shares import ShareSettings, ViewShares
    from engine.streaming.settings import StreamerSettings

    views = ViewShares(budget)
    device = headless_device()
    streamer = StreamerSettings(staging_bytes=256 << 10, virtual="off", mip_bias=GREEDY_BIAS)
    exchange_s: list[float] = []
    rows: list[list[dict[str, Any]]] = []
    peaks: list[int] = []

    def timed_exchange(seat: Any) -> None:
        exchange = seat.exchange

        def timed(*a: Any) -> int:
            t = time.perf_counter()
            grant = exchange(*a)
            exchange_s.append(time.perf_counter() - t)
            return grant
        seat.exchange = timed

    with made_current(device):
        loops = []
        try:
            for build, weight, options in (
                    (gallery.build, 1, dict(SCENE, cache_dir=cache) if cache else dict(SCENE)),
                    (gltf_demo.build, 2, {})):
                loops.append(FrameLoop.embedded(
                    device, build, size=SIZE, provider="streaming", streamer=streamer,
                    share=ShareSettings(views, weight=weight), options=options))
                timed_exchange(loops[-1].governor.share)
            device.ledger.reset_frame_peak()
            for frame in range(frames):
                loops[1].governor.share.visible = not hide[0] <= frame < hide[1]
                rows.append([loop.step(frame) for loop in loops])
                peaks.append(device.ledger.end_frame(frame).peak_bytes)
            floor = loops[1].governor.share.claim.floor
        finally:
            for loop in reversed(loops):
                loop.release()
            left = len(device.shutdown())

    def first(since: int, cond: Any) -> int | None:
        return next((f - since for f in range(since, frames) if cond(rows[f])), None)

    shown = rows[hide[0] - 1]
    handed = budget - floor
    led = Ledger()
    owner = led.owner("view")

    def add_remove() -> None:
        led.remove(led.add("buffer", "buffer", "b", 1024))

    def scoped(fn: Any) -> Any:
        def run() -> None:
            with led.attributed(owner):
                fn()
        return run

    for _ in range(64):  # a device with a few hundred objects, some unowned
        led.add("texture", "texture.static", "t", 4096)
    with led.attributed(owner):
        for _ in range(256):
            led.add("texture", "texture.streamed", "t", 4096)

    return {
        "budget_bytes": budget, "frames": frames, "hide": list(hide),
        "exchange_us_median": float(_median(exchange_s) or 0.0) * 1e6,
        "exchanges": len(exchange_s),
        "device_peak_max_bytes": max(peaks),
        "frames_over_budget": sum(p > budget for p in peaks),
        "hidden_floor_bytes": floor,
        "frames_to_hidden_at_floor": first(hide[0], lambda r: r[1]["total_bytes"] <= floor),
        "frames_to_grant_handed_over": first(hide[0], lambda r: r[0]["grant_bytes"] == handed),
        "frames_to_bytes_taken": first(
            hide[0], lambda r: r[0]["total_bytes"] > shown[0]["total_bytes"]),
        "frames_to_grant_back": first(
            hide[1], lambda r: r[1]["grant_bytes"] >= shown[1]["grant_bytes"]),
        "grants_shown": [r["grant_bytes"] for r in shown],
        "grants_hidden": [r["grant_bytes"] for r in rows[hide[1] - 1]],
        "objects_left": left,
        "ledger_add_remove_us": {"device": _median_us(repeats, add_remove),
                                 "owner": _median_us(repeats, scoped(add_remove))},
        "ledger_by_category_us": {"device": _median_us(repeats, led.by_category),
                                  "owner": _median_us(repeats, scoped(led.by_category))},
    }


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    return values[len(values) // 2] if values else None


def _median_us(repeats: int, fn: Any) -> float:
    """Median microseconds of `repeats` calls of `fn`."""
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return float(_median(samples) or 0.0) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("member", help="one member (the coordinator starts these)")
    m.add_argument("--group", required=True)
    m.add_argument("--budget", type=int, required=True)
    m.add_argument("--weight", type=float, default=1.0)
    m.add_argument("--floor", type=int, default=0)
    m.add_argument("--bias", type=float, default=GREEDY_BIAS)
    m.add_argument("--seconds", type=float, default=30.0)
    m.add_argument("--log", type=Path, required=True)
    m.add_argument("--cache", type=Path)
    m.add_argument("--go", type=Path, help="join only once this file exists")
    m.add_argument("--size", type=int, nargs=2, default=SIZE)
    m.add_argument("--count", type=int, default=SCENE["count"])
    m.add_argument("--texture-size", type=int, default=SCENE["texture_size"])
    m.add_argument("--fps", type=positive_int_arg,
                   help="frames a second at most (default: unpaced)")
    c = sub.add_parser("cost", help="the cost of one exchange (per frame)")
    c.add_argument("--members", type=int, default=4)
    v = sub.add_parser("views", help="two views drawing with one device (one process)")
    v.add_argument("--cache", type=Path, help="texture cache for the gallery")
    r = sub.add_parser("run", help="the whole scenario")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--budget", default="8MiB", type=budget_arg,
                   help='the group budget: "8MiB", or "80%%" of this device\'s memory')
    r.add_argument("--floor", default="1.25MiB", help="each member's floor")
    r.add_argument("--hold", type=float, default=2.5, help="seconds per phase")
    r.add_argument("--cache", type=Path, help="texture cache for the members")
    r.add_argument("--size", type=int, nargs=2, default=SIZE, help="each member's output")
    r.add_argument("--count", type=int, default=SCENE["count"], help="gallery textures")
    r.add_argument("--texture-size", type=int, default=SCENE["texture_size"])
    r.add_argument("--fps", type=positive_int_arg, help="pace each member to this frame rate")
    r.add_argument("--outsider", nargs=argparse.REMAINDER,
                   help="a command run beside the group (the GPU memory outsider)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.mode == "member":
        return member(args)
    if args.mode == "cost":
        print(json.dumps(exchange_cost(args.members), indent=1))
        return 0
    if args.mode == "views":
        print(json.dumps(one_device(cache=args.cache), indent=1))
        return 0
    from engine.gl.device import Device
    from engine.memory.budget import Budget
    from engine.memory.sizes import parse_bytes
    with Device.headless() as device:  # what a percentage is taken of
        budget = Budget.on_device(device, args.budget).bytes
    result = scenario(args.out, budget=budget, floor=parse_bytes(args.floor),
                      hold=args.hold, cache=args.cache, outsider=args.outsider,
                      size=tuple(args.size), count=args.count, texture_size=args.texture_size,
                      fps=args.fps)
    print(json.dumps({"phases": result["phases"], "sums": result["sums"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
