"""The driver matrix: the engine under emulated lesser drivers (tests/driver_profiles.py), each
run held to the full driver's picture of the same frame.

For every profile: `engine info --json` states the profile the context implies; the demo
scenes (gallery, gallery on virtual textures, wall, glTF) run deterministically within their
budget with nothing leaked; `engine view` of a folder, an offscreen canvas embedding and the
CLI's `demo gallery` (the README's first command), `demo wall` and `demo gltf` at a small size
exit 0 within their budget; every picture is compared with the full driver's (PSNR >= 35 dB
where only formats change, >= 30 dB where the draw path changes too).
A slice of the suite runs under each profile: its skips name what the driver lacks.

Run with `pytest --driver-matrix tests/test_drivers.py` (`.ci/run` does); without the option
these tests are deselected: they start some forty engine processes.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from driver_profiles import PROFILES, DriverProfile
from engine.textures.quality import psnr
from process_helpers import ROOT, headless_env

pytestmark = [pytest.mark.drivers, pytest.mark.slow]

SCENES = ("gallery", "gallery-vt", "wall", "gltf", "canvas")
CHILD = Path(__file__).with_name("driver_child.py")
#: where only formats change, and where the per-object path draws too (the issue's goals)
FORMAT_DB, PATH_DB = 35.0, 30.0
#: the suite's slice: modules of every layer that draw, stream, account and read back
SLICE = ("tests/test_render.py", "tests/test_vt_render.py", "tests/test_roundtrip.py",
         "tests/test_memory.py", "tests/test_leaks.py", "tests/test_sizes.py",
         "tests/test_batch.py", "tests/test_profile.py", "tests/test_hud.py",
         "tests/test_feedback.py")


def _env(profile: DriverProfile | None, cache: Path) -> dict[str, str]:
    env = headless_env(cache)
    for k in ("MESA_GL_VERSION_OVERRIDE", "MESA_GLSL_VERSION_OVERRIDE",
              "MESA_EXTENSION_OVERRIDE"):
        env.pop(k, None)
    if profile is not None:
        env.update(profile.env())
    env["ENGINE_CACHE"] = str(cache)
    return env


def _run(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def _pictures(out: Path, env: dict[str, str], folder: Path) -> None:
    for scene in SCENES:
        _run([str(CHILD), scene, str(out)], env)
    _run(["-m", "engine", "view", str(folder), "--headless", "--frames", "40", "--size",
          "160x96", "--wait-detail", "--screenshot", str(out / "view.png")], env)


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """Twenty JPEGs of several sizes: the wall's atlas pages are virtual textures."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(3)
    for i in range(20):
        w, h = (int(v) for v in rng.integers(300, 700, 2))
        y, x = np.mgrid[0:h, 0:w]
        img = np.stack([(x * 255 // w + i * 13) % 256, (y * 255 // h) % 256,
                        ((x ^ y) + i * 40) % 256], -1).astype(np.uint8)
        Image.fromarray(img).save(folder / f"p{i:02d}.jpg", quality=90)
    return folder


@pytest.fixture(scope="module")
def full(tmp_path_factory, photos, user_cache) -> Path:
    """The full driver's pictures of every scene."""
    out = tmp_path_factory.mktemp("full")
    _pictures(out, _env(None, user_cache), photos)
    return out


def _db(a: Path, b: Path) -> float:
    x, y = np.asarray(Image.open(a))[..., :3], np.asarray(Image.open(b))[..., :3]
    assert x.shape == y.shape, (a, x.shape, y.shape)
    return psnr(x, y)


@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_info_states_the_profile_of_the_context(profile: DriverProfile, user_cache):
    out = _run(["-m", "engine", "info", "--headless", "--json"], _env(profile, user_cache))
    data = json.loads(out.stdout)  # the driver's own warnings stay off stdout
    p = data["profile"]
    major, minor = (int(v) for v in profile.gl.split("."))
    assert data["gl_version"].startswith(profile.gl)
    assert p["gl_version"] == major * 100 + minor * 10 == data["glsl_version"]
    assert p["glsl_version"] == int(profile.glsl)
    assert p["draw_path"] == p["feedback_path"] == profile.draw_path
    assert p["served"]["BC7"] == profile.bc7_as
    assert p["compute"] == (profile.draw_path == "batched")
    assert p["feedback_reduce"] == "cpu"  # llvmpipe runs compute on the CPU: numpy is faster
    assert p["staging"] == ("plain" if "GL_ARB_buffer_storage" in profile.removed
                            else "persistent")
    names = {"GL_ARB_texture_compression_bptc": "BC7 sampling",
             "GL_ARB_multi_draw_indirect": "ARB_multi_draw_indirect",
             "GL_ARB_compute_shader": "ARB_compute_shader"}
    for ext, name in names.items():
        assert (name in p["missing"]) == (ext in profile.removed), name


@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_scenes_match_the_full_driver(profile: DriverProfile, full: Path, photos: Path,
                                      tmp_path: Path, user_cache):
    out = tmp_path / profile.name
    _pictures(out, _env(profile, user_cache), photos)
    floor = PATH_DB if profile.draw_path == "per_object" else FORMAT_DB
    scores = {}
    for scene in (*SCENES, "view"):
        scores[scene] = _db(full / f"{scene}.png", out / f"{scene}.png")
        meta = out / f"{scene}.json"
        if meta.is_file():
            run = json.loads(meta.read_text())
            assert run["over_budget_frames"] == 0, (scene, run)
            assert run["leaked_objects"] == 0, (scene, run)
            assert run["profile"]["draw_path"] == profile.draw_path
    print(f"{profile.name}: dB against the full driver: "  # shown by pytest -rP
          f"{ {k: round(v, 1) for k, v in scores.items()} }")
    low = {k: round(v, 1) for k, v in scores.items() if v < floor}
    assert not low, f"{profile.name}: below {floor} dB against the full driver: {low} " \
                    f"(all: { {k: round(v, 1) for k, v in scores.items()} })"


#: the CLI's demos at a small size: the README's first command (its budget measured from the
#: scene), the wall and the glTF scene under the default budget
DEMOS = {"gallery": ["--count", "12", "--texture-size", "256"],
         "wall": ["--count", "24", "--texture-size", "256"],
         "gltf": []}


@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_cli_demos_exit_0_within_their_budget(profile: DriverProfile, tmp_path: Path,
                                              user_cache):
    for demo, extra in DEMOS.items():
        report = tmp_path / f"{demo}.json"
        _run(["-m", "engine", "demo", demo, "--frames", "30", *extra, "--size", "160x96",
              "--headless", "--report", str(report)], _env(profile, user_cache))
        frames = json.loads(report.read_text())["frames"]
        assert len(frames) == 30, demo
        # The gallery's budget is measured from the scene after frame 0 and set for frame 1,
        # below what frame 0 held: frame 1 answers that drop (as any scripted drop); every
        # other frame is held to its budget, and no report says over_budget.
        over = [f["frame"] for prev, f in zip([None, *frames], frames)
                if f.get("peak_bytes", f["total_bytes"]) > f["budget_bytes"]
                and not (prev is not None and f["budget_bytes"] < prev["total_bytes"])]
        assert not over, f"{demo}: frames over the budget: {over}"
        assert not any(f["over_budget"] for f in frames), demo


@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_a_slice_of_the_suite_passes(profile: DriverProfile, user_cache):
    """The slice's failures are the driver's; its skips name a missing feature."""
    env = _env(profile, user_cache)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-m", "not slow",
                           "-p", "no:cacheprovider", "-rs", *SLICE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    tail = proc.stdout[-4000:]
    assert proc.returncode == 0, tail
    for line in proc.stdout.splitlines():
        if line.startswith("SKIPPED") and "this driver lacks" not in line:
            assert "not installed" in line or "absent" in line or "needs" in line, line
