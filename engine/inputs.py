"""The checks every user-given value goes through, from the command line or the API.

One module so that `--size 1920X1080` and `run_scene(..., size="1920X1080")` are read the same
way and refused with the same message: the CLI's argument types (engine.cli) wrap these
functions, `RunSettings` calls them on its fields. Each raises UsageError whose message names
the value and what is accepted; callers add the option's or field's name.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import BudgetError, UsageError

if TYPE_CHECKING:
    from .memory.budget import Budget, BudgetSpec

#: The largest output edge accepted before a device exists: GL 4.5 guarantees at least this
#: for GL_MAX_TEXTURE_SIZE, GL_MAX_RENDERBUFFER_SIZE and GL_MAX_VIEWPORT_DIMS; a run then
#: checks the driver's own limits and the memory the targets need (engine.hosts.run).
MAX_OUTPUT_EDGE = 16384
#: The gallery's smallest texture: its tiles are a quarter of the edge and the number label
#: drawn on one needs 8 texels (16 fails making the label tile).
MIN_TEXTURE_SIZE = 32

BUDGET_ACCEPTED = ("accepted: a size > 0 like 512MiB (binary) or 500MB (decimal), or a "
                   "percentage of the device's memory in (0, 100]")


def _whole(value: Any) -> int | None:
    """`value` as an int when it is a whole number (an int, or digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("+-").isdigit():
            return int(text)
    return None


def checked(name: str, check: Callable[[Any], Any], value: Any) -> Any:
    """`check(value)`, its UsageError prefixed with the field's or option's name (the API's
    form of the CLI's "argument --frames: ...")."""
    try:
        return check(value)
    except UsageError as exc:
        raise UsageError(f"{name}: {exc}") from None


def output_size(value: str | Sequence[int], max_edge: int | None = MAX_OUTPUT_EDGE
                ) -> tuple[int, int]:
    """WIDTHxHEIGHT ("1920x1080", "1920X1080") or a (width, height) pair of ints, each side
    1..max_edge. None: no upper bound here, for a caller with a device to ask (a run checks
    the driver's limits and memory before making anything, engine.hosts.run)."""
    top = "" if max_edge is None else f"-{max_edge}"
    accepted = f"accepted: WIDTHxHEIGHT or (width, height) ints, each 1{top or ' or more'}"
    if isinstance(value, str):
        parts: Sequence[Any] = value.strip().lower().split("x")
    elif isinstance(value, Sequence):
        parts = value
    else:
        raise UsageError(f"{value!r} is not a size; {accepted}")
    sides = [_whole(p) for p in parts]
    if len(sides) != 2 or None in sides:
        raise UsageError(f"{value!r} is not a size; {accepted}")
    w, h = sides
    assert w is not None and h is not None
    if min(w, h) < 1 or (max_edge is not None and max(w, h) > max_edge):
        raise UsageError(f"{w}x{h} is out of range; {accepted}")
    return w, h


def positive_int(value: Any) -> int:
    """A whole number >= 1 (frame counts, texture counts)."""
    n = _whole(value)
    if n is None:
        raise UsageError(f"{str(value)!r} is not a whole number; accepted: 1 or more")
    if n < 1:
        raise UsageError(f"{n} is out of range; accepted: 1 or more")
    return n


#: The most textures a demo scene takes (--count): ten times the largest wall measured (10,000
#: images on the H200). A count is checked before anything is listed or made: 10^8 used to
#: build 10^8 paths before the first check.
MAX_SCENE_COUNT = 100_000


def scene_count(value: Any) -> int:
    """A number of textures of a demo scene: 1..MAX_SCENE_COUNT."""
    n = positive_int(value)
    if n > MAX_SCENE_COUNT:
        raise UsageError(f"{n} is out of range; accepted: 1 to {MAX_SCENE_COUNT:,}")
    return n


def seed(value: Any) -> int:
    """A random seed: a whole number >= 0."""
    n = _whole(value)
    if n is None or n < 0:
        raise UsageError(f"{str(value)!r}: accepted: a whole number >= 0")
    return n


def probability(value: Any) -> float:
    """A probability in [0, 1]."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        p = math.nan
    if not 0.0 <= p <= 1.0:
        raise UsageError(f"{str(value)!r}: accepted: a number in [0, 1]")
    return p


def texture_edge(value: Any) -> int:
    """A texture edge: a power of two, MIN_TEXTURE_SIZE..MAX_OUTPUT_EDGE."""
    accepted = f"accepted: a power of two, {MIN_TEXTURE_SIZE}-{MAX_OUTPUT_EDGE}"
    n = _whole(value)
    if n is None:
        raise UsageError(f"{str(value)!r} is not a whole number; {accepted}")
    if not (MIN_TEXTURE_SIZE <= n <= MAX_OUTPUT_EDGE) or n & (n - 1):
        raise UsageError(f"{n} is out of range; {accepted}")
    return n


def budget(value: Any) -> BudgetSpec | Budget:
    """A budget: bytes (the one byte-size rule, engine.memory.sizes; an int is bytes) or a
    percentage of the device's memory, returned parsed (a BudgetSpec) once it is > 0; a
    Budget made already is the caller's and is returned as it is."""
    from .memory.budget import Budget, BudgetSpec

    if isinstance(value, Budget):
        return value
    try:
        spec = BudgetSpec.parse(value)
    except BudgetError as exc:
        said = str(exc).split("; accepted:")[0]
        raise UsageError(f"{said}; {BUDGET_ACCEPTED}") from None
    if spec.absolute is not None and spec.absolute <= 0:
        raise UsageError(f"budget must be > 0, got {value!r}; {BUDGET_ACCEPTED}")
    return spec
