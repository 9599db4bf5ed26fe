"""The pytest plugin seen from a user's test suite (pytester): it must FAIL the tests that
leak a GL object or go over their GL budget, naming what, and pass the clean ones.

All the user tests below run in one pytest subprocess (a fresh EGL context, as in a user's
CI); each assertion reads that run's per-test outcomes and its report text.
"""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytest.importorskip("moderngl")

USER_TESTS = '''
import pytest


def test_clean_under_leak_check(gl_leak_check, engine_device):
    buf = engine_device.buffer(reserve=4096, label="released-buffer")
    engine_device.release(buf)


def test_leaks_a_buffer(gl_leak_check, engine_device):
    engine_device.buffer(reserve=4096, label="leaky-buffer")


@pytest.mark.gl_budget("64KiB")
def test_under_budget(engine_device):
    buf = engine_device.buffer(reserve=16 * 1024, label="small-buffer")
    engine_device.release(buf)


@pytest.mark.gl_budget("64KiB")
def test_over_budget_even_though_released(engine_device):
    buf = engine_device.buffer(reserve=256 * 1024, label="big-buffer")
    engine_device.release(buf)


@pytest.mark.gl_budget("64KiB")
def test_over_budget_then_raises_itself(engine_device):
    buf = engine_device.buffer(reserve=256 * 1024, label="big-buffer-2")
    engine_device.release(buf)
    raise ValueError("the test's own error wins")
'''


@pytest.fixture
def run(pytester: pytest.Pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "engine_leaks", "-rA", "-q",
                                           "-p", "no:cacheprovider")
    if "no headless GL context" in result.stdout.str():
        pytest.skip("no headless GL context in the subprocess")
    return result


def _line(result, status: str, name: str) -> bool:
    return any(line.startswith(f"{status} ") and name in line for line in result.outlines)


def test_plugin_fails_leaks_and_budget_overruns_and_passes_clean_tests(run):
    out = run.stdout.str()
    # clean tests pass
    assert _line(run, "PASSED", "test_clean_under_leak_check"), out
    assert _line(run, "PASSED", "test_under_budget"), out
    # the leak fails the test at its teardown (pytest's ERROR: the body itself ran fine),
    # naming the object, and so fails the run
    assert _line(run, "ERROR", "test_leaks_a_buffer"), out
    assert "LeakError: 1 GL object" in out and "buffer 'leaky-buffer'" in out
    # over budget: the test itself fails, with the peak, the budget and the culprit
    assert _line(run, "FAILED", "test_over_budget_even_though_released"), out
    assert "over the test's gl_budget of 64.0 KiB" in out and "big-buffer" in out
    # a test that fails on its own reports its own error, not the budget's
    assert _line(run, "FAILED", "test_over_budget_then_raises_itself"), out
    assert "the test's own error wins" in out
    run.assert_outcomes(passed=3, failed=2, errors=1)  # the leaking test: passed + error
    assert run.ret == pytest.ExitCode.TESTS_FAILED


def test_gl_budget_marker_is_registered(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("-p", "engine_leaks", "--markers")
    assert any("gl_budget(size)" in line for line in result.outlines)
