"""Budget parsing and listeners, the ledger's totals/peaks/history, the probe's sanity rules."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.app.settings import RunSettings
from engine.errors import BudgetError, UsageError
from engine.memory.budget import DEFAULT_BUDGET, Budget, BudgetSpec
from engine.memory.ledger import Ledger
from engine.gl.probe import VramProbe
from engine.memory.probe import VramReading, sane
from engine.memory.summary import format_summary, summary_dict


def test_budget_specs():
    assert Budget("512MiB").bytes == 512 << 20
    assert Budget("1.5GB").bytes == 1_500_000_000
    assert Budget("50%", vram_total=8 << 30).bytes == 4 << 30
    assert Budget("50%").bytes == (2 << 30) // 2  # virtual VRAM where no probe exists
    assert Budget("25%", virtual_vram=1 << 30).bytes == 256 << 20
    assert Budget(0).bytes == 0
    for bad in ("lots", "-5MiB", "0%", "150%", "12 parsecs", -1):
        with pytest.raises(BudgetError):
            Budget(bad)
    assert str(BudgetSpec.parse("80%")) == "80%"


class _Memory:
    """A device as a budget sees it: only its memory reading."""

    def __init__(self, total: int | None) -> None:
        self.total = total

    def vram(self) -> VramReading:
        return VramReading(source=None if self.total is None else "NVX",
                           total_bytes=self.total, available_bytes=None)


def test_budget_on_device_resolves_the_one_default():
    assert Budget.on_device(_Memory(10 << 30)).bytes == 8 << 30  # DEFAULT_BUDGET, 80%
    assert Budget.on_device(_Memory(None)).bytes == int((2 << 30) * 0.8)  # virtual VRAM
    assert Budget.on_device(_Memory(8 << 30), BudgetSpec.parse("25%")).bytes == 2 << 30
    made = Budget("1GiB")
    assert Budget.on_device(_Memory(8 << 30), made) is made


def test_run_settings_carry_a_parsed_budget():
    assert RunSettings().budget == DEFAULT_BUDGET
    assert RunSettings(budget="50%").budget == BudgetSpec(fraction=0.5)
    assert RunSettings(budget=1024).budget == BudgetSpec(absolute=1024)
    for bad in ("lots", "0", "150%"):
        with pytest.raises(UsageError, match="budget"):
            RunSettings(budget=bad)


def test_budget_set_returns_new_bytes():
    b = Budget("1GiB")
    assert b.set("512MiB") == 512 << 20
    assert b.bytes == 512 << 20 and str(b.spec) == "512.0 MiB"


def test_ledger_totals_peak_history():
    led = Ledger()
    a = led.add("texture", "texture.static", "a", 100)
    b = led.add("renderbuffer", "target", "b", 50)
    led.end_frame(0)
    led.remove(a)
    c = led.add("texture", "texture.streamed", "c", 30)
    s = led.end_frame(1)
    assert led.total == 80 and led.peak == 150
    assert led.by_category() == {"target": 50, "texture.streamed": 30}
    assert led.count_by_category() == {"target": 1, "texture.streamed": 1}
    assert led.peak_by_category()["texture.static"] == 100
    assert [h.total_bytes for h in led.history] == [150, 80]
    assert s.peak_bytes == 150  # frame 1 began at 150 before the removal
    led.remove(b)
    led.remove(c)
    led.remove(c)  # idempotent
    assert led.total == 0
    with pytest.raises(ValueError):
        led.add("buffer", "buffer", "neg", -1)


class FakeRaw:
    def __init__(self, values):
        self.values = values

    def get_int(self, pname):
        v = self.values[pname]
        return v.pop(0) if isinstance(v, list) else v

    def get_ints(self, pname, n):
        return self.values[pname]


def test_probe_nvx_accumulates_evictions_and_rejects_nonsense():
    total_kib, avail_kib = 80 << 20, 60 << 20
    raw = FakeRaw({0x9047: total_kib, 0x9049: avail_kib, 0x904A: [0, 2, 3], 0x904B: [0, 10, 5]})
    probe = VramProbe(raw, {"GL_NVX_gpu_memory_info"})
    r1 = probe.read()
    r2 = probe.read()
    assert probe.source == "NVX" and r1.total_bytes == total_kib * 1024
    assert r2.evictions_total == 5 and r2.evicted_bytes_total == 15 * 1024
    nonsense = FakeRaw({0x9047: 0, 0x9049: 0, 0x904A: 0, 0x904B: 0})
    assert VramProbe(nonsense, {"GL_NVX_gpu_memory_info"}).source is None
    assert not sane(100, 200) and not sane(-1, None) and sane(100, 90) and sane(None, 5)
    ati = VramProbe(FakeRaw({0x87FC: [1000, 500, 0, 0]}), {"GL_ATI_meminfo"})
    assert ati.read().available_bytes == 1000 * 1024


def test_summary_table(device):
    tex = device.storage_texture("BC5", 256, 256, levels=9, label="summary")
    try:
        d = summary_dict(device.ledger, 256 << 20, device.vram())
        assert d["categories"]["texture.static"]["objects"] >= 1
        assert d["budget_bytes"] == 256 << 20
        assert d["headroom_bytes"] == d["budget_bytes"] - d["total_bytes"]
        text = format_summary(d)
        assert "texture.static" in text and "budget" in text
    finally:
        device.release(tex)


@pytest.mark.slow
@pytest.mark.needs("BC7 sampling")
def test_cli_info_json():
    out = subprocess.run([sys.executable, "-m", "engine", "info", "--json", "--headless",
                          "--budget", "256MiB"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("renderer", "gl_version", "compressed_formats", "vram", "budget_bytes"):
        assert key in data
    assert {"source", "total_bytes"} <= set(data["vram"])
    assert data["budget_bytes"] == 256 << 20
    assert set(data["compressed_formats"]) <= {"BC1", "BC2", "BC3", "BC4", "BC5", "BC6H", "BC7"}
    if "llvmpipe" in data["renderer"]:
        assert data["vram"]["total_bytes"] is None
        assert {"BC1", "BC7"} <= set(data["compressed_formats"])
        # NVML's view is absent on llvmpipe, and `info` says why instead of omitting it
        assert data["nvml"]["available"] is False and data["nvml"]["reason"].startswith("NVML")
    elif "NVIDIA" in data["renderer"] and data["nvml"].get("available", True):
        assert data["nvml"]["total_bytes"] > 0 and "others" in data["nvml"]
