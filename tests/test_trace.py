"""The run trace: Chrome trace-event JSON that Perfetto opens, well formed, ending where the
run's report ends."""
from __future__ import annotations

import json
import threading
import time

import pytest

from engine.hosts.run import run_scene
from engine.demos import DEMOS
from engine.diagnostics.report import load_report
from engine.diagnostics.trace import TraceError, Tracer, final_counters, validate_trace
from engine.errors import GLOutOfMemoryError, UsageError
from engine.gl.fake import FakeDevice
from engine.memory import events
from engine.streaming.contract import ProviderStats


OPTIONS = {"count": 6, "texture_size": 256, "format": "bc1", "frames": 90}


def _frame(tracer: Tracer, frame: int, **kw) -> None:
    t = time.perf_counter()
    record = {"frame": frame, "ms": 1.0, "cpu_ms": 0.8, "gpu_ms": None, "budget_bytes": 100,
              "render_scale": 1.0, "by_category": {"target": 10 + frame},
              "texture_wanted_bytes": 5, "texture_resident_bytes": 4, **kw}
    tracer.frame(record, [("split", t), ("streamer", t + 1e-4), ("end", t + 2e-4)],
                 ProviderStats(cache_slots_used=3))


def test_tracer_writes_every_kind_of_event(tmp_path):
    path = tmp_path / "t.json"
    tracer = Tracer(path)
    assert events.SINK is tracer
    _frame(tracer, 0)
    # a read finishing on a worker thread while the render thread traces frames
    worker = threading.Thread(target=lambda: events.SINK.span(
        "read", "read", time.perf_counter(), time.perf_counter() + 1e-3,
        {"file": "a.ktx2", "level": 2, "bytes": 64, "queue_ms": 0.1}))
    worker.start()
    worker.join()
    _frame(tracer, 1, budget_bytes=80)  # a budget change
    with pytest.raises(GLOutOfMemoryError):  # an out-of-memory allocation, through the allocator
        fake = FakeDevice()
        fake.fault_injector = lambda what, nbytes: True
        fake.texture((4, 4), 4)
    assert not path.exists()  # renamed into place at the end only
    tracer.close()
    assert events.SINK is None
    doc = json.loads(path.read_text())
    counts = validate_trace(doc)
    assert counts["b"] == counts["e"] == 1 and counts["M"] == 3
    assert counts["X"] == 2 * 3  # two frames, each a slice and two phase slices
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "i"}
    assert names == {"budget change", "out of memory"}
    final = final_counters(doc)
    assert final["bytes by category"] == {"target": 11}
    assert final["budget"] == {"budget": 80, "effective": 80}
    assert final["tiles resident"] == {"tiles": 3}


def test_one_trace_at_a_time(tmp_path):
    tracer = Tracer(tmp_path / "a.json")
    try:
        with pytest.raises(RuntimeError):
            Tracer(tmp_path / "b.json")
        assert not list(tmp_path.glob(".b.json*"))
    finally:
        tracer.close()


@pytest.mark.parametrize("events_, fault", [
    ([{"ph": "b", "name": "r", "cat": "read", "id": 1, "pid": 1, "tid": 1, "ts": 1}],
     "never ended"),
    ([{"ph": "e", "name": "r", "cat": "read", "id": 1, "pid": 1, "tid": 1, "ts": 1}],
     "without a begin"),
    ([{"ph": "b", "name": "r", "cat": "read", "id": 1, "pid": 1, "tid": 1, "ts": 5},
      {"ph": "e", "name": "r", "cat": "read", "id": 1, "pid": 1, "tid": 1, "ts": 4}],
     "ends before"),
    ([{"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 5, "args": {"v": 1}},
      {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 4, "args": {"v": 1}}], "back in time"),
    ([{"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 5, "args": {"v": "1"}}], "numbers"),
    ([{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 5}], "dur"),
    ([{"ph": "Q", "name": "f", "pid": 1, "tid": 1, "ts": 5}], "unknown ph"),
    ([{"ph": "i", "name": "f", "pid": 1, "tid": 1, "ts": "5"}], "not a number"),
])
def test_validator_names_each_fault(events_, fault):
    with pytest.raises(TraceError, match=fault):
        validate_trace({"traceEvents": events_})


def test_a_run_trace_is_well_formed_and_ends_at_the_report(dev, tmp_path):
    """The pressure demo, streamed, under its moving budget: reads, uploads, evictions and
    budget changes all happen; the trace's last counters are the report's last frame."""
    demo = DEMOS["pressure"]
    trace, report = tmp_path / "run.trace.json", tmp_path / "run.json"
    result = run_scene(demo.factory, device=dev, frames=OPTIONS["frames"], size=(96, 64),
                       provider="streaming", options=OPTIONS, on_frame=demo.hooks(OPTIONS),
                       trace=trace, report=report)
    assert events.SINK is None
    doc = json.loads(trace.read_text())
    counts = validate_trace(doc)
    frames = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "frame"]
    assert len(frames) == OPTIONS["frames"]
    phases = {e["name"] for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "phase"}
    assert {"split", "feedback", "streamer", "scene pass", "present"} <= phases
    spans = {e["cat"] for e in doc["traceEvents"] if e["ph"] == "b"}
    assert spans == {"read", "upload"} and counts["b"] == counts["e"]
    read = next(e for e in doc["traceEvents"] if e["ph"] == "b" and e["cat"] == "read")
    assert read["args"]["file"].endswith(".ktx2") and read["args"]["bytes"] > 0
    assert read["args"]["queue_ms"] >= 0 and "level" in read["args"]
    instants = {e["name"] for e in doc["traceEvents"] if e["ph"] == "i"}
    assert {"budget change", "eviction"} <= instants
    last = load_report(report)["frames"][-1]
    assert last == result.frames[-1]
    final = final_counters(doc)
    assert final["bytes by category"] == {**{c: 0 for c in final["bytes by category"]},
                                          **last["by_category"]}
    assert final["budget"] == {"budget": last["budget_bytes"],
                               "effective": last["effective_budget_bytes"]}
    assert final["pool"] == {"bytes": last["pool_bytes"]}
    assert final["texture bytes"] == {"wanted": last["texture_wanted_bytes"],
                                      "resident": last["texture_resident_bytes"]}
    assert final["render scale"] == {"scale": last["render_scale"]}
    assert final["tiles resident"] == {"tiles": last["cache_slots_used"]}
    # the report's summary carries the same last tiers
    assert result.summary["resident_by_tier"] == last["resident_by_tier"]
    assert sum(last["resident_by_tier"].values()) == last["texture_resident_bytes"]


def test_a_second_traced_loop_in_one_process_is_a_usage_error(dev, tmp_path):
    tracer = Tracer(tmp_path / "first.json")
    try:
        with pytest.raises(UsageError, match="trace="):
            run_scene(DEMOS["pressure"].factory, device=dev, frames=1, size=(32, 32),
                      options=OPTIONS, trace=tmp_path / "second.json")
    finally:
        tracer.close()


@pytest.mark.needs("BC1_RGB sampling")
def test_virtual_texture_tiles_are_traced(dev, tmp_path):
    """With the gallery's textures streamed virtually, tile reads and tile uploads are spans
    and the tiles-resident counter ends at the page cache's count."""
    from engine.streaming.settings import StreamerSettings

    demo = DEMOS["pressure"]
    trace = tmp_path / "vt.trace.json"
    result = run_scene(demo.factory, device=dev, frames=40, size=(96, 64), provider="streaming",
                       options={**OPTIONS, "frames": 40}, on_frame=demo.hooks(OPTIONS),
                       streamer=StreamerSettings(virtual_min_size=256), trace=trace)
    doc = json.loads(trace.read_text())
    validate_trace(doc)
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "b"}
    assert {"tile read", "tile upload"} <= names
    tile = next(e for e in doc["traceEvents"] if e["ph"] == "b" and e["name"] == "tile read")
    assert len(tile["args"]["tile"]) == 3 and tile["args"]["file"].endswith(".ktx2")
    assert final_counters(doc)["tiles resident"] == {"tiles": result.frames[-1]["cache_slots_used"]}
    assert result.frames[-1]["cache_slots_used"] > 0
