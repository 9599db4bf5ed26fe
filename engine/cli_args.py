"""The command line's argument types: each checks its value while parsing, so a user error is
one line naming the option and what it accepts, found before any work starts (the CLI rule,
engine/cli.py). The subcommands of every layer above (engine.cli, engine.bench,
engine.demos) take their types from here, not from the command module that includes them.
"""
from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import BudgetError, UsageError
from .memory.sizes import format_bytes

#: The largest output edge accepted before a device exists: GL 4.5 guarantees at least this
#: for GL_MAX_TEXTURE_SIZE, GL_MAX_RENDERBUFFER_SIZE and GL_MAX_VIEWPORT_DIMS, so it holds on
#: every driver the engine runs on (run_scene then checks the driver's own limits).
MAX_OUTPUT_EDGE = 16384
#: Bytes of render targets and read-backs per output pixel, an upper estimate: HDR colour
#: (RGBA16F, 8) + depth (4) + output (RGBA8, 4) + the FSR input and intermediate (8) + the
#: RGB read-back (3) = 27, rounded up. A size whose targets would not fit half the machine's
#: memory is refused (llvmpipe keeps "VRAM" in system memory; a GPU's own limit is checked
#: by the driver).
BYTES_PER_OUTPUT_PIXEL = 32
#: The gallery's smallest texture: its tiles are a quarter of the edge and the number label
#: drawn on one needs 8 texels (16 fails making the label tile).
MIN_TEXTURE_SIZE = 32


def examples(good: str, *bad: str) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    """Attach a valid value and values the type must refuse to an argument type: the CLI rule
    test feeds every option its bad values, so a new option is tested as soon as it exists."""
    def mark(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        fn.good_example = good  # type: ignore[attr-defined]
        fn.bad_examples = bad  # type: ignore[attr-defined]
        return fn
    return mark


def machine_memory() -> int:
    """Physical memory in bytes (0 when the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


@examples("80%", "abc", "-5%", "150%", "nan%", "0", "0%")
def budget_arg(text: str) -> str:
    """A budget: bytes ("512MiB", > 0) or a percentage of VRAM in (0, 100]."""
    from .memory.budget import BudgetSpec

    try:
        spec = BudgetSpec.parse(text)
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; accepted: a size > 0 like 512MiB or a "
                                         f"percentage in (0, 100]") from None
    if spec.absolute is not None and spec.absolute <= 0:
        raise argparse.ArgumentTypeError(f"budget must be > 0, got {text!r}; accepted: a size "
                                         f"> 0 like 512MiB or a percentage in (0, 100]")
    return text


@examples("320x180", "99999x99999", "0x10", "-5x10", "big", "nan")
def size_arg(text: str) -> tuple[int, int]:
    """An output size WIDTHxHEIGHT, 1..MAX_OUTPUT_EDGE per side, within the machine's memory."""
    accepted = f"accepted: WIDTHxHEIGHT, each 1-{MAX_OUTPUT_EDGE}"
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; {accepted}") from None
    if not (1 <= w <= MAX_OUTPUT_EDGE and 1 <= h <= MAX_OUTPUT_EDGE):
        raise argparse.ArgumentTypeError(f"{w}x{h} is out of range; {accepted}")
    memory = machine_memory()
    need = w * h * BYTES_PER_OUTPUT_PIXEL
    if memory and need > memory // 2:
        raise argparse.ArgumentTypeError(
            f"{w}x{h} needs about {format_bytes(need)} of render targets, more than half this "
            f"machine's {format_bytes(memory)}; {accepted} and within memory")
    return w, h


@examples("3", "0", "-3", "x", "1.5")
def positive_int(text: str) -> int:
    """A whole number >= 1 (frame counts, texture counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; accepted: 1 or "
                                         f"more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is out of range; accepted: 1 or more")
    return value


@examples("7", "x", "-1", "1.5")
def seed_arg(text: str) -> int:
    """A random seed: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a whole number >= 0")
    return value


@examples("0.5", "x", "-0.1", "1.5", "nan")
def probability_arg(text: str) -> float:
    """A probability in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a number in [0, 1]")
    return value


@examples("64", "3", "100", "0", "x", str(2 * MAX_OUTPUT_EDGE))
def texture_size_arg(text: str) -> int:
    """A texture edge: a power of two, MIN_TEXTURE_SIZE..MAX_OUTPUT_EDGE."""
    accepted = f"accepted: a power of two, {MIN_TEXTURE_SIZE}-{MAX_OUTPUT_EDGE}"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; {accepted}") from None
    if not (MIN_TEXTURE_SIZE <= value <= MAX_OUTPUT_EDGE) or value & (value - 1):
        raise argparse.ArgumentTypeError(f"{value} is out of range; {accepted}")
    return value


def registry_arg(what: str, names: Callable[[], Sequence[str]]) -> Callable[[str], str]:
    """A name that must be in a registry (providers, upscalers, demos), read when parsing so
    names registered later are accepted."""
    @examples("", "bogus")
    def check(text: str) -> str:
        known = sorted(names())
        if text not in known:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; accepted: "
                                             f"{', '.join(known)}")
        return text
    check.good_example = min(names())  # type: ignore[attr-defined]
    check.__name__ = what.replace(" ", "_")
    return check


def _first_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def check_output_dir(path: Path) -> None:
    """UsageError unless a file can be made in folder `path` (it may not exist yet)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path} exists and is not a folder")
    base = _first_existing(path)
    if not base.is_dir():
        raise UsageError(f"{path}: {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"{path}: {base} is not writable")


@examples("out/result.json", "/dev/null/x.out")
def output_file(text: str) -> Path:
    """A file this command will write: its folder must exist or be creatable and writable,
    and the path must not be a folder."""
    path = Path(text)
    try:
        if path.is_dir():
            raise UsageError(f"{path} is a folder")
        check_output_dir(path.parent if str(path.parent) else Path("."))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text!r} ({exc}); accepted: a file "
                                         f"path in a writable folder") from None
    return path


@examples(__file__, "/nonexistent/file.bin")
def input_file(text: str) -> Path:
    """A file this command reads: it must exist and be a file."""
    path = Path(text)
    if not path.is_file():
        why = "is a folder" if path.is_dir() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {why}; accepted: an existing file")
    return path
