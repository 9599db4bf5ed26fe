"""The NVML probe: a fake `pynvml` module stands in for NVIDIA's library (the logic: choosing
the GPU, merging the process lists, excluding ourselves, turning every failure into a reason),
and the real absence path runs on this machine where there is no NVIDIA driver."""
from __future__ import annotations

import ctypes.util
import importlib.util
import os
import sys
import types
from types import SimpleNamespace

import pytest

from engine.memory.nvml import NvmlProbe, NvmlReading, NvmlUnavailable, probe_nvml

GiB = 1 << 30
MiB = 1 << 20


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(*, init_error: int | None = None, names=("NVIDIA H200",), compute=(),
                graphics=(), graphics_error: int | None = None, memory_error: int | None = None,
                proc_names: dict[int, str | bytes] | None = None) -> types.ModuleType:
    """A module with the handful of pynvml calls the probe makes, recording init/shutdown."""
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.calls = []

    def init():
        m.calls.append("init")
        if init_error is not None:
            raise FakeNVMLError(init_error)

    def get_memory(handle):
        if memory_error is not None:
            raise FakeNVMLError(memory_error)
        return SimpleNamespace(total=80 * GiB, free=50 * GiB, used=30 * GiB)

    def graphics_list(handle):
        if graphics_error is not None:
            raise FakeNVMLError(graphics_error)
        return [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in graphics]

    def name_of(pid):
        if proc_names and pid in proc_names:
            return proc_names[pid]
        raise FakeNVMLError(6)  # NVML_ERROR_NOT_FOUND

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: len(names)
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    m.nvmlDeviceGetName = lambda h: names[h[1]].encode()  # old bindings: bytes
    m.nvmlSystemGetDriverVersion = lambda: "580.159.04"
    m.nvmlDeviceGetMemoryInfo = get_memory
    m.nvmlDeviceGetComputeRunningProcesses = \
        lambda h: [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in compute]
    m.nvmlDeviceGetGraphicsRunningProcesses = graphics_list
    m.nvmlSystemGetProcessName = name_of
    return m


@pytest.fixture
def use_fake(monkeypatch):
    def install(**kw):
        mod = fake_pynvml(**kw)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod
    return install


def test_reading_merges_process_lists_and_excludes_this_process(use_fake):
    me = os.getpid()
    nv = use_fake(compute=[(4242, 20 * GiB), (me, 300 * MiB)],
                  graphics=[(4242, 20 * GiB), (me, 300 * MiB), (777, None)],
                  proc_names={4242: b"python train.py", 777: "Xorg"})
    r = probe_nvml()
    assert isinstance(r, NvmlReading)
    assert (r.total_bytes, r.free_bytes, r.used_bytes) == (80 * GiB, 50 * GiB, 30 * GiB)
    assert r.gpu_name == "NVIDIA H200" and r.gpu_index == 0 and r.source == "NVML"
    assert r.driver_version == "580.159.04"
    assert r.self_bytes == 300 * MiB
    # largest first; the trainer counted once although both lists hold it
    assert [(p.pid, p.name, p.used_bytes, p.kind) for p in r.others] == [
        (4242, "python train.py", 20 * GiB, "compute+graphics"),
        (777, "Xorg", None, "graphics")]
    assert r.others_bytes == 20 * GiB
    assert r.as_dict()["others_bytes"] == 20 * GiB
    assert nv.calls == ["init", "shutdown"]  # NVML released after a one-shot reading
    assert r.summary() == ("NVML NVIDIA H200: 30.0 GiB used of 80.0 GiB, 50.0 GiB free; "
                           "this process 300.0 MiB; 2 other process(es) hold 20.0 GiB: "
                           "python train.py (4242) 20.0 GiB, Xorg (777) n/a")
    v = r.to_vram_reading()
    assert (v.source, v.total_bytes, v.available_bytes) == ("NVML", 80 * GiB, 50 * GiB)


def test_gpu_chosen_by_gl_renderer(use_fake):
    use_fake(names=("NVIDIA A100-SXM4-80GB", "NVIDIA H200"))
    r = probe_nvml(renderer="NVIDIA H200/PCIe/SSE2")
    assert isinstance(r, NvmlReading) and (r.gpu_index, r.gpu_name) == (1, "NVIDIA H200")
    assert probe_nvml(0).gpu_name == "NVIDIA A100-SXM4-80GB"


def test_non_nvidia_renderer_gets_a_reason(use_fake):
    nv = use_fake()
    r = probe_nvml(renderer="llvmpipe (LLVM 15.0.6, 256 bits)")
    assert isinstance(r, NvmlUnavailable)
    assert "llvmpipe" in r.reason and "NVIDIA H200" in r.reason
    assert nv.calls == ["init", "shutdown"]


@pytest.mark.parametrize("code, words", [(12, "libnvidia-ml.so.1 not found"),
                                         (9, "driver is not loaded"),
                                         (999, "FakeNVMLError")])
def test_init_failures_become_reasons(use_fake, code, words):
    nv = use_fake(init_error=code)
    r = probe_nvml()
    assert isinstance(r, NvmlUnavailable) and words in r.reason and r.summary() == r.reason
    assert r.as_dict() == {"source": "NVML", "available": False, "reason": r.reason}
    assert nv.calls == ["init"]  # nothing to shut down after a failed init


def test_failures_after_init_become_reasons_and_release_nvml(use_fake):
    nv = use_fake(memory_error=15)
    r = probe_nvml()
    assert isinstance(r, NvmlUnavailable) and "lost" in r.reason
    assert nv.calls == ["init", "shutdown"]
    assert isinstance(probe_nvml(5), NvmlUnavailable)  # no such GPU


def test_one_unsupported_process_list_keeps_the_other(use_fake):
    use_fake(compute=[(31337, 2 * GiB)], graphics_error=3)  # NOT_SUPPORTED
    r = probe_nvml()
    assert isinstance(r, NvmlReading)
    assert [(p.pid, p.used_bytes, p.kind) for p in r.others] == [(31337, 2 * GiB, "compute")]


def test_probe_reads_repeatedly_until_closed(use_fake):
    nv = use_fake()
    probe = NvmlProbe.open()
    assert isinstance(probe, NvmlProbe)
    assert all(isinstance(probe.read(), NvmlReading) for _ in range(3))
    probe.close()
    assert isinstance(probe.read(), NvmlUnavailable)
    assert nv.calls == ["init", "shutdown"]


def test_missing_package_is_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    r = probe_nvml()
    assert isinstance(r, NvmlUnavailable) and "nvidia-ml-py" in r.reason


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is None, reason="nvidia-ml-py absent")
@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                    reason="this machine has NVIDIA's driver library")
def test_real_library_absent_here():
    """The real binding on a machine without NVIDIA's driver (llvmpipe CI): a reason."""
    r = probe_nvml()
    assert isinstance(r, NvmlUnavailable)
    assert r.reason.startswith("NVML: libnvidia-ml.so.1 not found")


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("pynvml") is None, reason="nvidia-ml-py absent")
def test_real_nvml_on_an_nvidia_gpu():
    """Where the driver is present: sane numbers (the device machine runs this)."""
    r = probe_nvml()
    if isinstance(r, NvmlUnavailable):
        pytest.skip(r.reason)
    assert r.total_bytes > 0 and 0 <= r.free_bytes <= r.total_bytes
    assert r.used_bytes <= r.total_bytes and r.gpu_name
