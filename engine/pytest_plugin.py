"""pytest plugin: a headless device fixture and a leak-check fixture for users' CI.

Installed as an entry point (`engine_leaks`), so any project depending on the engine gets:
  - `engine_device`: a session-wide headless Device (EGL; llvmpipe in CI). When no GL context
    can be made the run stops with one line saying so: a CI job that lost its GL driver must
    not go green by skipping every test. Opt into skipping instead with the ini option
    `engine_skip_without_gl = true` or the flag `--engine-skip-without-gl`.
  - `engine_context`: the device's moderngl context for a test's own objects, wrapped in
    `engine.TrackedContext`: `engine_context.buffer(...)`, `.program(...)`,
    `.vertex_array(...)` are ledgered (category "user") and leak-checked like the engine's.
  - `gl_leak_check`: fails the test itself (not its teardown) when GL objects made during it
    are still alive at its end, naming each object: type, label, GL name, bytes. An object
    made through `engine_context` (or any TrackedContext) and dropped without `release()`
    is such a leak too: moderngl frees nothing when a Python object is collected.
  - `@pytest.mark.gl_budget("64MiB")` (or "80%" of the device's memory; sizes follow the one
    byte-size rule, engine.memory.sizes): fails the test when the bytes live on
    `engine_device` (its ledger's total) went above that size at any moment during the
    test, even if the test released everything before it ended: a budget is about the peak,
    not the end state.

Every test that uses `engine_device` starts from a clean ledger: objects a test made on it and
left alive are released after the test (and logged), so they never count against a later
test's budget or leak check. Sizes in messages are exact (bytes beside the rounded figure).
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

log = logging.getLogger(__name__)
_BUDGET_KEY = pytest.StashKey["_PeakWatch"]()
_MARK_KEY = pytest.StashKey[int]()
SKIP_INI = "engine_skip_without_gl"
SKIP_FLAG = "--engine-skip-without-gl"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(SKIP_INI, type="bool", default=False,
                  help="skip the tests that need engine_device when no GL context can be "
                       "made (default: stop the run with an error)")
    parser.addoption(SKIP_FLAG, action="store_true", default=False,
                     help="skip the tests that need engine_device when no GL context can be "
                          "made (default: stop the run with an error)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gl_budget(size): fail when the GL bytes live on engine_device exceed "
                   "SIZE (e.g. '64MiB', '500MB', '80%') at any moment of the test")


class _PeakWatch:
    """The highest ledger total seen while active, and the allocations live at that moment.

    The ledger keeps one peak for the device's whole life (and per-frame peaks that a scene
    run resets every frame), so neither answers "how high did *this test* go". The watch
    wraps the ledger's `add` on this one instance for the test's duration: every allocation
    (the only thing that raises the total) is seen, with no change to the ledger itself."""

    def __init__(self, ledger: Any, limit: int) -> None:
        self.ledger = ledger
        self.limit = limit
        self.peak = ledger.total
        self.at_peak: list[Any] = []
        self._original = None

    def __enter__(self) -> _PeakWatch:
        original = self.ledger.add

        def add(*args: Any, **kwargs: Any) -> Any:
            alloc = original(*args, **kwargs)
            total = self.ledger.total
            if total > self.peak:
                self.peak = total
                if total > self.limit:
                    self.at_peak = sorted(self.ledger.items(), key=lambda a: -a.nbytes)[:5]
            return alloc

        self._original = original
        self._own = "add" in vars(self.ledger)  # already wrapped on the instance?
        self.ledger.add = add
        return self

    def __exit__(self, *exc: object) -> None:
        if self._original is not None:
            if self._own:
                self.ledger.add = self._original
            else:
                del self.ledger.add  # back to the class's method
            self._original = None

    def check(self, name: str) -> None:
        from .memory.sizes import format_exact

        if self.peak <= self.limit:
            return
        largest = "; ".join(f"{a.kind} '{a.label}' {format_exact(a.nbytes)}"
                            for a in self.at_peak)
        raise AssertionError(f"{name}: GL memory peaked at {format_exact(self.peak)}, "
                             f"{self.peak - self.limit:,} bytes over the test's gl_budget of "
                             f"{format_exact(self.limit)} (largest live then: {largest})")


def _budget_bytes(spec: Any, device: Any, nodeid: str) -> int:
    """The marker's size in bytes: the one byte-size rule, or a percentage of the device's
    memory (its probed VRAM, or the virtual size where the driver reports none)."""
    from .errors import UsageError
    from .inputs import budget
    from .memory.budget import Budget

    try:
        return Budget.on_device(device, budget(spec)).bytes
    except UsageError as exc:
        pytest.fail(f"{nodeid}: gl_budget({spec!r}): {exc}", pytrace=False)


@pytest.fixture(autouse=True)
def _engine_gl_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    """Arms a _PeakWatch for tests marked gl_budget; the check runs right after the test's
    call (pytest_runtest_call below), so going over budget is the test's failure."""
    marker = request.node.get_closest_marker("gl_budget")
    if marker is None:
        yield
        return
    spec = marker.args[0] if marker.args else marker.kwargs.get("size")
    if spec is None:
        pytest.fail(f"{request.node.nodeid}: gl_budget needs a size, e.g. "
                    "@pytest.mark.gl_budget('64MiB')", pytrace=False)
    device = request.getfixturevalue("engine_device")
    with _PeakWatch(device.ledger, _budget_bytes(spec, device, request.node.nodeid)) as watch:
        request.node.stash[_BUDGET_KEY] = watch
        yield
        del request.node.stash[_BUDGET_KEY]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Around the test's body: what it made on engine_device is counted from here (fixtures
    set up before it are not the test's), and after it its leak check and its budget run as
    failures of the test itself (a test that already failed keeps its own error)."""
    device = _device_of(item)
    if device is not None:
        item.stash[_MARK_KEY] = device.tracker.mark()
    result = yield
    if device is not None and "gl_leak_check" in getattr(item, "fixturenames", ()):
        device.flush_releases()
        leaked = device.tracker.made_since(item.stash[_MARK_KEY])
        if leaked:
            from .errors import LeakError

            raise LeakError(leaked)
    watch = item.stash.get(_BUDGET_KEY, None)
    if watch is not None:
        watch.check(item.nodeid)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the test's fixtures are torn down: whatever its body made on engine_device and
    left alive is released (and logged), so the next test starts from a clean ledger."""
    result = yield
    device = _device_of(item)
    mark = item.stash.get(_MARK_KEY, None)
    if device is not None and mark is not None and not device.closed:
        device.flush_releases()
        left = device.tracker.made_since(mark)
        if left:
            log.warning("%s left %d GL object(s) alive; released so later tests do not count "
                        "them:\n%s", item.nodeid, len(left),
                        "\n".join("  " + r.describe() for r in left))
            device.release_records(left)
    return result


def _device_of(item: pytest.Item) -> Any:
    return getattr(item, "funcargs", {}).get("engine_device")


@pytest.fixture(scope="session")
def engine_device(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The session's headless Device; each test's use of it is accounted from a clean ledger
    (see the module docstring)."""
    from .errors import ContextError
    from .gl.device import Device

    try:
        dev = Device.headless()
    except ContextError as exc:
        config = request.config
        if config.getini(SKIP_INI) or config.getoption(SKIP_FLAG):
            pytest.skip(f"no headless GL context: {exc}")
        pytest.exit(f"engine_device: no headless GL context ({exc}); fix the GL driver, or "
                    f"skip these tests with `{SKIP_INI} = true` in the pytest ini or "
                    f"{SKIP_FLAG}", returncode=pytest.ExitCode.TESTS_FAILED)
    yield dev
    dev.shutdown()


@pytest.fixture
def engine_context(engine_device: Any) -> Any:
    """A moderngl context for the test's own objects: `engine_device`'s, tracked
    (engine.gl.tracking.tracked_context), so they count in `gl_leak_check` and `gl_budget`."""
    from .gl.tracking import tracked_context

    return tracked_context(engine_device)


@pytest.fixture
def gl_leak_check(engine_device: Any) -> Any:
    """Use in a test: every GL object made through `engine_device` (or a context wrapped
    with TrackedContext) during the test must be released by its end, or the test fails."""
    return engine_device.tracker


@pytest.fixture
def engine_scene_runner(engine_device):
    """Run a scene on the shared headless device: `runner(scene, frames=..., budget=...)`
    returns the RunResult; pair it with engine.testing's assert_under_budget/no_leaks."""
    from .testing import run_headless

    def run(scene, **kw):
        kw.setdefault("device", engine_device)
        return run_headless(scene, **kw)
    return run
