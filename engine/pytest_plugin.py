"""pytest plugin: a headless device fixture and a leak-check fixture for users' CI.

Installed as an entry point (`engine_leaks`), so any project depending on the engine gets:
  - `engine_device`: a session-wide headless Device (EGL; llvmpipe in CI),
  - `gl_leak_check`: fails the test if GL objects made during it are still alive at its end
    (a LeakError at the test's teardown, naming each object: type, label, bytes);
  - `@pytest.mark.gl_budget("64MiB")`: fails the test when the bytes live on `engine_device`
    (its ledger's total) went above that size at any moment during the test, even if the
    test released everything before it ended: a budget is about the peak, not the end state.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

log = logging.getLogger(__name__)
_BUDGET_KEY = pytest.StashKey["_PeakWatch"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gl_budget(size): fail when the GL bytes live on engine_device exceed "
                   "SIZE (e.g. '64MiB') at any moment of the test")


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
        from .memory.sizes import format_bytes

        if self.peak <= self.limit:
            return
        largest = "; ".join(f"{a.kind} '{a.label}' {format_bytes(a.nbytes)}"
                            for a in self.at_peak)
        raise AssertionError(f"{name}: GL memory peaked at {format_bytes(self.peak)}, over the "
                             f"test's gl_budget of {format_bytes(self.limit)} (largest live "
                             f"then: {largest})")


@pytest.fixture(autouse=True)
def _engine_gl_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    """Arms a _PeakWatch for tests marked gl_budget; the check runs right after the test's
    call (pytest_runtest_call below), so going over budget is the test's failure."""
    marker = request.node.get_closest_marker("gl_budget")
    if marker is None:
        yield
        return
    from .memory.sizes import parse_bytes

    spec = marker.args[0] if marker.args else marker.kwargs.get("size")
    if spec is None:
        raise pytest.UsageError(f"{request.node.nodeid}: gl_budget needs a size, "
                                "e.g. @pytest.mark.gl_budget('64MiB')")
    device = request.getfixturevalue("engine_device")
    with _PeakWatch(device.ledger, parse_bytes(spec)) as watch:
        request.node.stash[_BUDGET_KEY] = watch
        yield
        del request.node.stash[_BUDGET_KEY]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    watch = item.stash.get(_BUDGET_KEY, None)
    if watch is not None:
        watch.check(item.nodeid)
    return result


@pytest.fixture(scope="session")
def engine_device():
    from .errors import ContextError
    from .gl.device import Device
    try:
        dev = Device.headless()
    except ContextError as exc:
        pytest.skip(f"no headless GL context: {exc}")
    yield dev
    dev.shutdown()


@pytest.fixture
def gl_leak_check(engine_device) -> Iterator:
    """Use in a test: every GL object made through `engine_device` (or a context wrapped
    with TrackedContext) during the test must be released by its end."""
    with engine_device.leak_check() as tracker:
        yield tracker


@pytest.fixture
def engine_scene_runner(engine_device):
    """Run a scene on the shared headless device: `runner(scene, frames=..., budget=...)`
    returns the RunResult; pair it with engine.testing's assert_under_budget/no_leaks."""
    from .testing import run_headless

    def run(scene, **kw):
        kw.setdefault("device", engine_device)
        return run_headless(scene, **kw)
    return run
