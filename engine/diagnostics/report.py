"""The per-run report: one JSON document with a summary and one record per frame.

Runs in CI, demos and benchmarks all write the same shape, so one validator, one timeline
picture (diagnostics.timeline) and one set of test assertions (engine.testing) read any of
them. The frame loop (engine.render.runner) produces the per-frame records; `build_report`
turns them into the document and is the one place the summary is computed.

    {"schema": 1,
     "metadata": {"command", "scene", "options", "engine_version", "renderer", "gl_version",
                  "created_utc", "host", "python"},          (optional: older files lack it)
     "summary": {"frames", "budget_bytes", "peak_bytes", "peak_by_category",
                 "frame_ms_p50", "frame_ms_p99", "leaked_objects", "over_budget_frames", ...},
     "frames": [{"frame", "ms", "total_bytes", "budget_bytes", "by_category",
                 "render_scale", "texture_resident_bytes", "texture_wanted_bytes", ...}, ...]}

Extra keys are allowed everywhere (hooks add their own, e.g. `budget_fraction`); the
required ones below are what readers may rely on. The metadata block says what produced the
report, so a file found later can be reproduced and compared fairly: `collect_metadata`
fills what the process knows (command line, engine version, date, host) and takes what only
the caller knows (scene, options, the GL renderer and version from the device).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__

SCHEMA_VERSION = 1
SUMMARY_KEYS: dict[str, type | tuple[type, ...]] = {
    "frames": int, "budget_bytes": int, "peak_bytes": int, "peak_by_category": dict,
    "frame_ms_p50": (int, float), "frame_ms_p99": (int, float), "leaked_objects": int}
FRAME_KEYS: dict[str, type | tuple[type, ...]] = {
    "frame": int, "ms": (int, float), "total_bytes": int, "budget_bytes": int,
    "by_category": dict, "render_scale": (int, float), "texture_resident_bytes": int,
    "texture_wanted_bytes": int}
# Metadata keys and their types, checked when present (every key is optional: a report made
# by a library call has no command line, one made without a device no renderer).
METADATA_KEYS: dict[str, type | tuple[type, ...]] = {
    "command": list, "scene": (str, type(None)), "options": dict, "engine_version": str,
    "renderer": str, "gl_version": str, "created_utc": str, "host": str, "python": str}


class ReportError(ValueError):
    """A report that lacks a required key or has one of the wrong type; names the key."""


def engine_version() -> str:
    """The engine's own version (`engine.__version__`, the one the package metadata of the
    distribution `vram-budget-renderer` is built from)."""
    return __version__


def _jsonable(value: Any) -> Any:
    """Options as JSON can hold them: paths and other objects become strings."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def collect_metadata(*, command: Sequence[str] | None = None, scene: str | None = None,
                     options: Mapping[str, Any] | None = None, renderer: str | None = None,
                     gl_version: str | None = None,
                     now: datetime.datetime | None = None) -> dict[str, Any]:
    """The metadata block of a report. `command` defaults to this process's command line
    (sys.argv); `renderer` and `gl_version` come from the device (Device.caps) because this
    layer does not ask GL itself; `now` (UTC) is for reproducible tests."""
    when = (now or datetime.datetime.now(datetime.timezone.utc)).astimezone(
        datetime.timezone.utc)
    meta: dict[str, Any] = {
        "command": [str(a) for a in (sys.argv if command is None else command)],
        "scene": scene,
        "options": _jsonable(dict(options or {})),
        "engine_version": engine_version(),
        "created_utc": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "host": platform.node(),
        "python": platform.python_version(),
    }
    if renderer is not None:
        meta["renderer"] = str(renderer)
    if gl_version is not None:
        meta["gl_version"] = str(gl_version)
    return meta


def build_report(frames: list[dict[str, Any]], *, leaked_objects: int,
                 extra: Mapping[str, Any] | None = None,
                 metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report document for a run's per-frame records.

    `metadata` (see `collect_metadata`) becomes the report's "metadata" block; without it
    the report has none, as files written before it existed.

    `extra` goes into the summary and wins over computed values: the runner passes the
    ledger's exact `peak_by_category` (which sees transient peaks inside a frame, unlike the
    end-of-frame samples) and the GL renderer name. The budget is the last frame's (the
    budget can move during a run; `budget_bytes_min` keeps the tightest one).
    """
    # A frame time that is NaN or infinite (a clock glitch, a hand-edited file) says nothing
    # about the run's timing: the percentiles skip it and the summary counts it.
    all_ms = [float(f["ms"]) for f in frames]
    ms = [v for v in all_ms if np.isfinite(v)]
    peak_by_cat: dict[str, int] = {}
    for f in frames:
        for cat, nbytes in f.get("by_category", {}).items():
            peak_by_cat[cat] = max(peak_by_cat.get(cat, 0), int(nbytes))
    budgets = [int(f["budget_bytes"]) for f in frames]
    summary: dict[str, Any] = {
        "frames": len(frames),
        "budget_bytes": budgets[-1] if budgets else 0,
        "budget_bytes_min": min(budgets, default=0),
        "peak_bytes": max((int(f.get("peak_bytes", f["total_bytes"])) for f in frames),
                          default=0),
        "peak_by_category": peak_by_cat,
        "frame_ms_p50": float(np.percentile(ms, 50)) if ms else 0.0,
        "frame_ms_p99": float(np.percentile(ms, 99)) if ms else 0.0,
        "leaked_objects": int(leaked_objects),
        "nonfinite_frame_times": len(all_ms) - len(ms),
        "over_budget_frames": sum(1 for f in frames
                                  if int(f["total_bytes"]) > int(f["budget_bytes"])),
    }
    summary.update(extra or {})
    report: dict[str, Any] = {"schema": SCHEMA_VERSION}
    if metadata is not None:
        report["metadata"] = _jsonable(dict(metadata))
    report.update({"summary": summary, "frames": list(frames)})
    validate_report(report)
    return report


def _check(obj: Any, keys: Mapping[str, type | tuple[type, ...]], where: str) -> None:
    if not isinstance(obj, dict):
        raise ReportError(f"{where}: not an object")
    for key, types in keys.items():
        if key not in obj:
            raise ReportError(f"{where}: missing key '{key}'")
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise ReportError(f"{where}.{key}: {type(value).__name__} {value!r} is not "
                              f"{getattr(types, '__name__', types)}")


def _check_metadata(meta: Any) -> None:
    if not isinstance(meta, dict):
        raise ReportError("metadata: not an object")
    for key, types in METADATA_KEYS.items():
        if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], types)):
            raise ReportError(f"metadata.{key}: {type(meta[key]).__name__} {meta[key]!r} is "
                              f"not {getattr(types, '__name__', types)}")
    if "command" in meta and not all(isinstance(a, str) for a in meta["command"]):
        raise ReportError("metadata.command: not a list of strings")


def validate_report(d: Any) -> None:
    """Raise ReportError naming the first missing or mistyped required key. The metadata
    block is optional (reports written before it existed still load); when present its
    known keys must have their types."""
    if not isinstance(d, dict):
        raise ReportError("report: not an object")
    for key in ("summary", "frames"):
        if key not in d:
            raise ReportError(f"report: missing key '{key}'")
    if "metadata" in d:
        _check_metadata(d["metadata"])
    _check(d["summary"], SUMMARY_KEYS, "summary")
    if not isinstance(d["frames"], list):
        raise ReportError("frames: not a list")
    for i, frame in enumerate(d["frames"]):
        _check(frame, FRAME_KEYS, f"frames[{i}]")
    if d["summary"]["frames"] != len(d["frames"]):
        raise ReportError(f"summary.frames: {d['summary']['frames']} but "
                          f"{len(d['frames'])} frame records")


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and validate a report file."""
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: cannot read report ({exc})") from exc
    try:
        validate_report(d)
    except ReportError as exc:
        raise ReportError(f"{path}: {exc}") from exc
    return d


def write_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Validate and write (pretty enough to diff, compact enough for 10k frames)."""
    validate_report(report)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return path
