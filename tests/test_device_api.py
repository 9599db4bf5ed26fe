"""Every `device.<name>` the engine uses exists on a Device.

Paths that only run on a GPU (sparse commits, bindless handles, timer queries) never execute
on llvmpipe, so a rename in the device layer could leave them calling a name that is gone:
that happened once (sparse commit called a Device method the device split had moved), and
only the H200 found it. This reads the source instead of running it.
"""
from __future__ import annotations

import re
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "engine"
# `device.<name>` not followed by an assignment (attributes a module sets are not uses).
USE = re.compile(r"\bdevice\.(_?[A-Za-z]\w*)\b(?!\s*=[^=])")
#: `device.commands.<name>`: the device's commands part, used directly (no forwards).
COMMAND_USE = re.compile(r"\bdevice\.commands\.(_?[A-Za-z]\w*)\b(?!\s*=[^=])")


def uses(root: Path = ENGINE, pattern: re.Pattern[str] = USE) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for m in pattern.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(m.group(1), set()).add(str(path.relative_to(root.parent)))
    return found


def test_every_device_attribute_used_exists(engine_device):
    names = uses()
    assert len(names) > 20  # the scan sees the engine's calls
    missing = {n: sorted(files) for n, files in names.items() if not hasattr(engine_device, n)}
    assert not missing, f"Device has no such attribute: {missing}"


def test_every_device_command_used_exists(engine_device):
    names = uses(pattern=COMMAND_USE)
    assert {"upload", "upload_levels", "set_min_lod"} <= set(names)  # the scan sees the calls
    missing = {n: sorted(files) for n, files in names.items()
               if not hasattr(engine_device.commands, n)}
    assert not missing, f"Commands has no such method: {missing}"


def test_the_scan_finds_a_missing_name(engine_device, tmp_path):
    planted = tmp_path / "engine" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("def f(device):\n    device.x = 1\n    return device._drain_errors()\n")
    names = uses(planted.parent)
    assert "x" not in names  # an assignment is not a use
    assert "_drain_errors" in names and not hasattr(engine_device, "_drain_errors")
