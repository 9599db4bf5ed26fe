"""pytest plugin: a headless device fixture and a leak-check fixture for users' CI.

Installed as an entry point (`engine_leaks`), so any project depending on the engine gets:
  - `engine_device`: a session-wide headless Device (EGL; llvmpipe in CI),
  - `gl_leak_check`: fails the test if GL objects made during it are still alive at its end.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def engine_device():
    from ..errors import ContextError
    from ..gl.device import Device
    try:
        dev = Device.headless(budget="1GiB")
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
    from ..testing import run_headless

    def run(scene, **kw):
        kw.setdefault("device", engine_device)
        return run_headless(scene, **kw)
    return run
