"""Shared fixtures. The engine's own pytest plugin gives `engine_device` and `gl_leak_check`;
it is registered by the package's entry point, or here when running from a plain checkout."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTDATA = ROOT.parent / "shared" / "testdata"


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("engine_leaks"):
        config.pluginmanager.import_plugin("engine.diagnostics.pytest_plugin")


@pytest.fixture
def device(engine_device):
    """The session's headless device, checked for leaks around each test that uses it."""
    with engine_device.leak_check():
        yield engine_device


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"shared test data not found at {TESTDATA}")
    return TESTDATA
