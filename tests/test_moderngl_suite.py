"""moderngl's own test suite, run twice: on a bare EGL context and through TrackedContext.

The wrapper's promise is that it behaves as the context itself; the strongest check at hand is
moderngl's suite (~500 tests of state, factories, object lifetimes and release orders). Its
tests are in the sdist, not the wheel: the sdist of the installed version is fetched once into
a cache folder (ENGINE_TEST_CACHE, default ~/.cache/engine-tests) and the test skips, saying
why, when it cannot be had. Both runs must give every test the same outcome (including the
few that fail on llvmpipe either way) and end by exiting, not by a signal.

The two runs take about 80 s of wall time on a 2-core machine, more than the rest of the
suite may spend, so the test runs only when asked: `ENGINE_MODERNGL_SUITE=1 python -m pytest
tests/test_moderngl_suite.py` (docs/benchmarks.md, "Embedding", has its last result).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.environ.get("ENGINE_MODERNGL_SUITE") != "1",
    reason="moderngl's own suite, both ways, takes about 80 s: set ENGINE_MODERNGL_SUITE=1")]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _suite() -> Path:
    """moderngl's tests/ folder for the installed version, from the cached sdist."""
    import moderngl

    version = moderngl.__version__
    cache = Path(os.environ.get("ENGINE_TEST_CACHE", Path.home() / ".cache" / "engine-tests"))
    tests = cache / f"moderngl-{version}" / "tests"
    if tests.is_dir():
        return tests
    sdist = cache / f"moderngl-{version}.tar.gz"
    if not sdist.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        try:
            got = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                 "--disable-pip-version-check", "-q", f"moderngl=={version}", "-d", str(cache)],
                capture_output=True, text=True, timeout=180)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"cannot fetch the moderngl {version} sdist: {exc}")
        if got.returncode != 0 or not sdist.is_file():
            last = (got.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"cannot fetch the moderngl {version} sdist: {last}")
    prefix = f"moderngl-{version}/tests/"
    staging = cache / f".extract-{os.getpid()}"  # renamed into place whole: never half a suite
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()
                   and ".." not in Path(m.name).parts]
        if not members:
            pytest.skip(f"the moderngl {version} sdist has no tests/ folder")
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(staging, members=members, filter="data")
        else:  # plain files under tests/ only (checked above)
            tar.extractall(staging, members=members)
    tests.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging / prefix, tests)
    shutil.rmtree(staging, ignore_errors=True)
    return tests


def _outcomes(junit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(junit).iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[key] = "+".join(sorted(kinds)) or "passed"
    return out


def test_moderngl_suite_same_through_tracked_context(tmp_path):
    pytest.importorskip("glcontext")
    tests = _suite()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE / "moderngl_suite"),
                                                          str(ROOT)])}
    runs = {}
    for mode in ("bare", "tracked"):  # both at once: each is about a minute on llvmpipe
        junit = tmp_path / f"{mode}.xml"
        runs[mode] = (junit, subprocess.Popen(
            [sys.executable, "-m", "pytest", "-c", os.devnull, "-p", "suite_fixtures", "-q",
             "-p", "no:cacheprovider", "--continue-on-collection-errors",
             f"--junitxml={junit}", str(tests)],
            cwd=tests, env={**env, "ENGINE_MGL_SUITE": mode,
                            "ENGINE_MGL_SUITE_STATS": str(tmp_path / "stats.json")},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    results = {}
    for mode, (junit, proc) in runs.items():
        out, _ = proc.communicate(timeout=600)
        # 0: all passed; 1: some failed (a few do on llvmpipe, bare as well); a negative
        # status is a signal (the segmentation fault at exit this guards against)
        assert proc.returncode in (0, 1), f"{mode} run ended with {proc.returncode}:\n{out[-3000:]}"
        results[mode] = _outcomes(junit)
    bare, tracked = results["bare"], results["tracked"]
    assert len(bare) > 400, f"only {len(bare)} moderngl tests ran"
    differ = {k: (bare.get(k), tracked.get(k)) for k in bare.keys() | tracked.keys()
              if bare.get(k) != tracked.get(k)}
    assert not differ, f"{len(differ)} tests differ (bare, tracked): {sorted(differ.items())}"
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["tracked_objects"] > 100, stats  # the tracked run did go through the wrapper
