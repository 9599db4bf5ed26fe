"""The wheel carries what an installed engine needs: shaders, demos, examples and sample
assets inside the `engine` package, and no stray top-level `demos` module."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_contains_shaders_demos_and_assets(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shaders = {p.name for p in (ROOT / "shaders").glob("*.glsl")}
    assert shaders and all(f"engine/shaders/{s}" in names for s in shaders)
    demos = {p.name for p in (ROOT / "demos").glob("*.py")}
    assert all(f"engine/demos/{d}" in names for d in demos)
    examples = {p.name for p in (ROOT / "examples").glob("*.py")}
    assert "view_jupyter.py" in examples
    assert all(f"engine/examples/{e}" in names for e in examples)
    assert "engine/assets/models/BoxTextured/BoxTextured.glb" in names
    assert "engine/diagnostics/snapshot.html" in names  # the snapshot page's template
    assert any(n.startswith("engine/assets/photos/") and n.endswith(".jpg") for n in names)
    assert not any(n.startswith(("demos/", "shaders/", "assets/", "examples/", "tests/"))
                   for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "engine.pytest_plugin" in zipfile.ZipFile(wheel).read(entry).decode()
