"""Shared fixtures. The engine's own pytest plugin gives `engine_device` and `gl_leak_check`;
it is registered by the package's entry point, or here when running from a plain checkout."""
from __future__ import annotations

import os
import select
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

# One BLAS thread per process: the xdist workers already fill the cores, and OpenBLAS's idle
# threads spin between numpy's small matrix products (2% of the suite's CPU). Set before
# numpy loads, here and in the engine processes the tests start.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from engine.textures.cachedir import cache_root  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TESTDATA = ROOT.parent / "shared" / "testdata"
#: The user's texture cache ($ENGINE_CACHE, else ~/.cache/engine), read before any test points
#: ENGINE_CACHE elsewhere.
USER_CACHE = cache_root()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--driver-matrix", action="store_true",
                     help="run the driver matrix (tests/test_drivers.py: the engine under "
                          "emulated lesser drivers); deselected without it")


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("engine_leaks"):
        config.pluginmanager.import_plugin("engine.pytest_plugin")


def _skip_what_the_driver_lacks(items: list[pytest.Item]) -> None:
    """`@pytest.mark.needs("BC7 sampling", ...)` (names as in tests/driver_needs.py): skip
    where this driver lacks one. The profile is read once, at collection, from a device made
    and shut down before any test's own."""
    marked = [(item, [f for m in item.iter_markers("needs") for f in m.args])
              for item in items if item.get_closest_marker("needs")]
    if not marked:
        return
    from driver_needs import lacking
    from engine.gl.device import Device

    dev = Device.headless()
    try:
        profile = dev.profile
    finally:
        dev.shutdown()
    for item, features in marked:
        missing = lacking(profile, *features)
        if missing:
            item.add_marker(pytest.mark.skip(reason="this driver lacks " + "; ".join(missing)))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules with the most slow tests first, each module's tests kept in order.

    pytest-xdist (`--dist loadfile --no-loadscope-reorder`) hands the modules to the workers
    in this order: the long ones start first and the short ones fill in at the end, so the
    workers finish together instead of one running a long module alone. Counted before
    `-m` deselects, so the fast tier keeps the same order."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    if not config.getoption("--driver-matrix"):
        matrix = [item for item in items if item.get_closest_marker("drivers")]
        if matrix:
            config.hook.pytest_deselected(items=matrix)
            items[:] = [item for item in items if not item.get_closest_marker("drivers")]
    slow = Counter(module(item) for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[module(item)])
    _skip_what_the_driver_lacks(items)


@pytest.fixture(scope="module")
def dev():
    """A device of the module's own, for modules that count objects or change GL state
    apart from the session's device."""
    from vt_helpers import headless_device

    d = headless_device()
    yield d
    d.shutdown()


@pytest.fixture
def device(engine_device):
    """The session's headless device, checked for leaks around each test that uses it."""
    with engine_device.leak_check():
        yield engine_device


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch) -> Path:
    """A texture cache of the test's own (bakes and generated assets land there)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENGINE_CACHE", str(cache))
    return cache


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary folder of this run that every pytest-xdist worker of it shares (a
    worker's base folder is one of the run's `popen-gwN` folders)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def _encoded_once(tmp_path_factory) -> Iterator[None]:
    """texture_helpers.encode keeps what it makes in the run's shared folder."""
    import texture_helpers

    texture_helpers.ENCODED = _run_folder(tmp_path_factory) / "encoded"
    yield
    texture_helpers.ENCODED = None


@pytest.fixture(scope="session")
def generated_assets(tmp_path_factory) -> Path:
    """One cache of generated gallery and wall textures for the tests that only read them.

    The generators are deterministic (a texture number always gives the same bytes), fill
    in only what is missing and write each file whole under its name (a temporary name
    first), so the tests asking for the same sets share one bake, the workers of a
    pytest-xdist run included, instead of making one each. Tests that damage, replace or
    count freshly made files use a cache of their own."""
    folder = _run_folder(tmp_path_factory) / "generated-assets"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def user_cache() -> Path:
    """The user's texture cache, where the demos and benchmarks keep their generated sets, for
    the tests that only read a set whose bake costs seconds of every run otherwise: made there
    once a machine (filled in when missing; the generators are deterministic and write each
    file whole). Tests of the generators themselves make their files afresh elsewhere."""
    return USER_CACHE


@pytest.fixture(scope="session")
def wall_cache(user_cache: Path) -> Path:
    """The wall flights' generated set (demos.wall_assets), in the user's cache."""
    return user_cache / "wall"


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"shared test data not found at {TESTDATA}")
    return TESTDATA


# Window tests run their windows in subprocesses on this display (a window context must
# not become current in the test process, which shares one headless device).
XVFB = Path("/usr/bin/Xvfb")


def _read_display_number(fd: int, proc: subprocess.Popen, timeout: float) -> int | None:
    """The number Xvfb writes to its -displayfd pipe (a line), or None if it exits first."""
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while not got.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                chunk = os.read(fd, 16)
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(fd)
    return int(got) if got.strip().isdigit() else None


@pytest.fixture(scope="session")
def xvfb_display() -> Iterator[str]:
    """The DISPLAY value to hand to window subprocesses; skips when there is no way to get one."""
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    if not XVFB.exists():
        pytest.skip("no DISPLAY and no Xvfb")
    # -displayfd: the server picks a free display number itself and writes it to the pipe,
    # so test processes running side by side (pytest-xdist) never race for one number.
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([str(XVFB), "-displayfd", str(write_fd), "-screen", "0", "800x600x24",
                             "-nolisten", "tcp"], pass_fds=(write_fd,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        n = _read_display_number(read_fd, proc, timeout=10.0)
        if n is None:
            pytest.skip("Xvfb did not start")
        yield f":{n}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
