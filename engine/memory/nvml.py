"""VRAM as NVIDIA's management library (NVML, through `nvidia-ml-py`) sees it.

Why beside NVX: GL_NVX_gpu_memory_info tells how much is free, but not *who* holds the rest.
NVML names the other processes on the same GPU (the noisy neighbours: a training job, another
viewer) with the bytes each holds, so `engine info`, the HUD and the governor can say why the
effective budget shrank. NVML is optional: the package may be missing, or the machine may have
no NVIDIA driver (llvmpipe in CI). Then the probe answers `NvmlUnavailable` with a reason a
person can act on; it never raises, so callers need no try/except around a diagnostic.

    reading = probe_nvml(renderer=device.caps.renderer)
    if isinstance(reading, NvmlReading):
        print(reading.free_bytes, [(p.pid, p.name, p.used_bytes) for p in reading.others])
    else:
        print(reading.reason)       # e.g. "NVML: libnvidia-ml.so.1 not found"

For a per-frame view (HUD) open an `NvmlProbe` once and call `read()`: NVML's init costs tens
of milliseconds, a reading after it well under one.
"""
from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import install_hint
from .probe import VramReading
from .sizes import format_bytes

log = logging.getLogger(__name__)

# NVML return codes (nvml.h); the Python binding keeps them on its exceptions as `.value`.
_NO_PERMISSION = 4
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_GPU_IS_LOST = 15

_REASONS = {
    _LIBRARY_NOT_FOUND: "NVML: libnvidia-ml.so.1 not found (no NVIDIA driver on this machine)",
    _DRIVER_NOT_LOADED: "NVML: the NVIDIA kernel driver is not loaded",
    _NO_PERMISSION: "NVML: no permission to query the GPU",
    _GPU_IS_LOST: "NVML: the GPU has fallen off the bus or is otherwise lost",
}


@dataclass(frozen=True)
class NvmlProcess:
    """A process holding memory on the GPU. `used_bytes` is None where the driver does not
    say (Windows WDDM, some containers)."""

    pid: int
    name: str
    used_bytes: int | None
    kind: str  # "compute", "graphics" or "compute+graphics"


@dataclass(frozen=True)
class NvmlReading:
    """One NVML reading of one GPU; bytes. `others` are the processes other than this one;
    `self_bytes` is what NVML charges this process (None when it is not listed, e.g. inside
    a container whose pids NVML cannot map)."""

    gpu_index: int
    gpu_name: str
    total_bytes: int
    free_bytes: int
    used_bytes: int
    driver_version: str | None = None
    self_bytes: int | None = None
    others: tuple[NvmlProcess, ...] = ()
    source: str = field(default="NVML", init=False)

    @property
    def others_bytes(self) -> int:
        """Bytes the other processes hold, as far as NVML knows each."""
        return sum(p.used_bytes or 0 for p in self.others)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["others_bytes"] = self.others_bytes
        return d

    def to_vram_reading(self) -> VramReading:
        """The same figures as the probe type the governor reads beside NVX's."""
        return VramReading("NVML", self.total_bytes, self.free_bytes)

    def summary(self, top: int = 3) -> str:
        """One line for `engine info` and the HUD: used of total, ours, the neighbours."""
        line = (f"NVML {self.gpu_name}: {format_bytes(self.used_bytes)} used of "
                f"{format_bytes(self.total_bytes)}, {format_bytes(self.free_bytes)} free; "
                f"this process {format_bytes(self.self_bytes)}")
        if not self.others:
            return line + "; no other process"
        named = ", ".join(f"{p.name or '?'} ({p.pid}) {format_bytes(p.used_bytes)}"
                          for p in self.others[:top])
        more = f" and {len(self.others) - top} more" if len(self.others) > top else ""
        return (f"{line}; {len(self.others)} other process(es) hold "
                f"{format_bytes(self.others_bytes)}: {named}{more}")


@dataclass(frozen=True)
class NvmlUnavailable:
    """Why there is no NVML reading (for `engine info` and the HUD to show as it is)."""

    reason: str
    source: str = field(default="NVML", init=False)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "available": False, "reason": self.reason}

    def summary(self, top: int = 3) -> str:
        return self.reason


def _text(value: Any) -> str:
    """Old bindings return bytes, new ones str."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _reason(exc: BaseException) -> str:
    code = getattr(exc, "value", None)
    if code in _REASONS:
        return _REASONS[code]
    return f"NVML: {type(exc).__name__}: {exc}"


def _import_pynvml() -> ModuleType | NvmlUnavailable:
    try:
        import pynvml
    except ImportError:
        return NvmlUnavailable("NVML: the nvidia-ml-py package is not installed "
                               f"({install_hint('nvml')})")
    return pynvml


def _process_name(nv: ModuleType, pid: int) -> str:
    """NVML's name for a pid, else /proc's, else '' (another container's pid)."""
    try:
        name = _text(nv.nvmlSystemGetProcessName(pid))
        if name:
            return name
    except Exception:  # NotFound / NoPermission: the pid is not ours to name
        pass
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class NvmlProbe:
    """NVML initialised once, one GPU chosen; `read()` per frame, `close()` at the end."""

    def __init__(self, nv: ModuleType, index: int, handle: Any, name: str,
                 pid: int | None = None) -> None:
        self._nv = nv
        self.index = index
        self._handle = handle
        self.name = name
        self.pid = os.getpid() if pid is None else pid
        self._open = True
        try:
            self.driver_version: str | None = _text(nv.nvmlSystemGetDriverVersion())
        except Exception:
            self.driver_version = None

    @classmethod
    def open(cls, index: int | None = None, *, renderer: str | None = None,
             pid: int | None = None) -> NvmlProbe | NvmlUnavailable:
        """Initialise NVML and pick the GPU: `index` if given, else the first whose name is
        in the GL `renderer` string ("NVIDIA H200/PCIe/SSE2" holds "NVIDIA H200"), else 0.
        A renderer that is not NVIDIA's (llvmpipe) gets no reading: NVML's numbers would be
        some other device's, not the one the engine draws with."""
        nv = _import_pynvml()
        if isinstance(nv, NvmlUnavailable):
            return nv
        try:
            nv.nvmlInit()
        except Exception as exc:
            return NvmlUnavailable(_reason(exc))
        try:
            count = int(nv.nvmlDeviceGetCount())
            if count < 1:
                nv.nvmlShutdown()
                return NvmlUnavailable("NVML: no NVIDIA GPU found")
            names = [_text(nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i)))
                     for i in range(count)]
            chosen = index
            if chosen is None and renderer:
                chosen = next((i for i, n in enumerate(names) if n and n in renderer), None)
                if chosen is None and "nvidia" not in renderer.lower():
                    nv.nvmlShutdown()
                    return NvmlUnavailable(f"NVML: GL renders on '{renderer}', not on an "
                                           f"NVIDIA GPU ({', '.join(names)} present)")
            chosen = 0 if chosen is None else chosen
            if not 0 <= chosen < count:
                nv.nvmlShutdown()
                return NvmlUnavailable(f"NVML: no GPU {chosen} ({count} present)")
            handle = nv.nvmlDeviceGetHandleByIndex(chosen)
            return cls(nv, chosen, handle, names[chosen], pid)
        except Exception as exc:
            try:
                nv.nvmlShutdown()
            except Exception:
                pass
            return NvmlUnavailable(_reason(exc))

    def read(self) -> NvmlReading | NvmlUnavailable:
        if not self._open:
            return NvmlUnavailable("NVML: probe closed")
        nv, h = self._nv, self._handle
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            procs: dict[int, tuple[int | None, set[str]]] = {}
            for kind, fn in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                             ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
                try:
                    listed = getattr(nv, fn)(h)
                except Exception as exc:  # one list unsupported (some vGPUs): keep the other
                    log.debug("%s failed: %s", fn, exc)
                    continue
                for p in listed:
                    pid = int(p.pid)
                    used = p.usedGpuMemory
                    old_used, kinds = procs.get(pid, (None, set()))
                    # A process in both lists is charged once: the driver reports the same
                    # per-process total in each.
                    best = used if old_used is None else (old_used if used is None
                                                          else max(old_used, int(used)))
                    procs[pid] = (None if best is None else int(best), kinds | {kind})
        except Exception as exc:
            return NvmlUnavailable(_reason(exc))
        self_bytes = procs.pop(self.pid, (None, set()))[0]
        others = tuple(sorted(
            (NvmlProcess(pid, _process_name(nv, pid), used, "+".join(sorted(kinds)))
             for pid, (used, kinds) in procs.items()),
            key=lambda p: -(p.used_bytes or 0)))
        return NvmlReading(gpu_index=self.index, gpu_name=self.name,
                           total_bytes=int(mem.total), free_bytes=int(mem.free),
                           used_bytes=int(mem.used), driver_version=self.driver_version,
                           self_bytes=self_bytes, others=others)

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self._nv.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown failed: %s", exc)

    def __enter__(self) -> NvmlProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def probe_nvml(index: int | None = None, *, renderer: str | None = None,
               pid: int | None = None) -> NvmlReading | NvmlUnavailable:
    """One reading: open, read, close. Never raises (see the module docstring)."""
    try:
        probe = NvmlProbe.open(index, renderer=renderer, pid=pid)
        if isinstance(probe, NvmlUnavailable):
            return probe
        with probe:
            return probe.read()
    except Exception as exc:  # a binding we do not know misbehaving: still no raise
        return NvmlUnavailable(_reason(exc))
