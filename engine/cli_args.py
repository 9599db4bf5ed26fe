"""The command line's argument types: each checks its value while parsing, so a user error is
one line naming the option and what it accepts, found before any work starts (the CLI rule,
engine/cli.py). The subcommands of every layer above (engine.cli, lab,
engine.demos) take their types from here, not from the command module that includes them;
the checks themselves are engine.inputs', shared with the API.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import inputs
from .errors import UsageError
from .memory.sizes import format_bytes

#: Bytes of render targets and read-backs per output pixel, an upper estimate: HDR colour
#: (RGBA16F, 8) + depth (4) + output (RGBA8, 4) + the FSR input and intermediate (8) + the
#: RGB read-back (3) = 27, rounded up. A size whose targets would not fit half the machine's
#: memory is refused (llvmpipe keeps "VRAM" in system memory; a run then checks the device's
#: own limits and memory, engine.hosts.run.check_output_size).
BYTES_PER_OUTPUT_PIXEL = 32


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


def _checked(check: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argparse type from one of engine.inputs' checks (the API's checks too): its
    UsageError becomes argparse's one-line error naming the option."""
    def parse(text: str) -> Any:
        try:
            return check(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = name
    return parse


budget_arg = examples("80%", "abc", "-5%", "150%", "nan%", "0", "0%", "512", "512M", "0MiB")(
    _checked(inputs.budget, "budget_arg"))
positive_int = examples("3", "0", "-3", "x", "1.5")(_checked(inputs.positive_int, "positive_int"))
scene_count_arg = examples("200", "0", "x", "100000000")(
    _checked(inputs.scene_count, "scene_count_arg"))
seed_arg = examples("7", "x", "-1", "1.5")(_checked(inputs.seed, "seed_arg"))
probability_arg = examples("0.5", "x", "-0.1", "1.5", "nan")(
    _checked(inputs.probability, "probability_arg"))
texture_size_arg = examples("64", "3", "100", "0", "x", str(2 * inputs.MAX_OUTPUT_EDGE))(
    _checked(inputs.texture_edge, "texture_size_arg"))


@examples("320x180", "99999x99999", "0x10", "-5x10", "big", "nan")
def size_arg(text: str) -> tuple[int, int]:
    """An output size WIDTHxHEIGHT (engine.inputs.output_size), within the machine's memory."""
    try:
        w, h = inputs.output_size(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    memory = machine_memory()
    need = w * h * BYTES_PER_OUTPUT_PIXEL
    if memory and need > memory // 2:
        raise argparse.ArgumentTypeError(
            f"{w}x{h} needs about {format_bytes(need)} of render targets, more than half this "
            f"machine's {format_bytes(memory)}; accepted: WIDTHxHEIGHT within memory")
    return w, h


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


@examples("out/result.json", "/dev/null/x.out", "/dev/null")
def output_file(text: str) -> Path:
    """A file this command will write: its folder must exist or be creatable and writable,
    and the path must be a regular file or nothing yet (outputs are written to a temporary
    name and renamed over it, so a device such as /dev/null would be replaced, as root)."""
    path = Path(text)
    try:
        if path.is_dir():
            raise UsageError(f"{path} is a folder")
        if path.exists() and not path.is_file():
            raise UsageError(f"{path} exists and is not a regular file")
        check_output_dir(path.parent if str(path.parent) else Path("."))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text!r} ({exc}); accepted: a file "
                                         f"path in a writable folder") from None
    return path


@examples("out/report.json", "report", "r.txt", "/dev/null")
def json_output_file(text: str) -> Path:
    """A JSON file this command will write (--report, --trace): `output_file`, named .json."""
    return _with_suffix(output_file(text), (".json",), "a .json file path")


def _image_suffixes() -> tuple[str, ...]:
    """The suffixes Pillow can write an RGB picture as."""
    from PIL import Image

    Image.init()
    return tuple(sorted(s for s, fmt in Image.registered_extensions().items()
                        if fmt in Image.SAVE and fmt in ("PNG", "JPEG", "BMP", "TIFF", "WEBP",
                                                         "PPM", "TGA")))


@examples("shot.png", "shot", "shot.json", "/dev/full")
def image_output_file(text: str) -> Path:
    """A picture this command will write (--screenshot): `output_file`, named with an image
    suffix Pillow writes (.png, .jpg, ...), checked before the run rather than after it."""
    return _with_suffix(output_file(text), _image_suffixes(),
                        "an image path (.png, .jpg, .bmp, .tif, .webp)")


def _with_suffix(path: Path, suffixes: tuple[str, ...], accepted: str) -> Path:
    if path.suffix.lower() not in suffixes:
        raise argparse.ArgumentTypeError(
            f"cannot write {str(path)!r}: {'no' if not path.suffix else 'an unknown'} file "
            f"extension{' ' + repr(path.suffix) if path.suffix else ''}; accepted: {accepted}")
    return path


@examples(__file__, "/nonexistent/file.bin")
def input_file(text: str) -> Path:
    """A file this command reads: it must exist and be a file."""
    path = Path(text)
    if not path.is_file():
        why = "is a folder" if path.is_dir() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {why}; accepted: an existing file")
    return path


def add_trace_option(parser: argparse.ArgumentParser) -> None:
    """`--trace FILE` for a command that runs frames (demo, soak, view): one spelling and
    one check for all of them; the run gets it as `RunSettings.trace`
    (engine.diagnostics.trace says what the file holds)."""
    parser.add_argument("--trace", type=json_output_file, metavar="FILE",
                        help="write a Chrome trace-event JSON of the run: open it in "
                             "https://ui.perfetto.dev (Open trace file) or chrome://tracing")


@examples(__file__, "/nonexistent/image.png")
def image_input(text: str) -> str:
    """An image file, or a folder of images (bake's inputs; a glTF scene is a file too)."""
    if not (Path(text).is_file() or Path(text).is_dir()):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist; accepted: an existing "
                                         f"image file or a folder of images")
    return text


@examples("out", "/dev/null/out", __file__)
def output_folder(text: str) -> str:
    """A folder this command writes into: an existing folder, or a path whose nearest
    existing ancestor is a writable folder (then it is made). A regular file there is
    refused before any work."""
    try:
        check_output_dir(Path(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(f"cannot write into {text!r} ({exc}); accepted: a "
                                         f"folder (made if missing) in a writable place") from None
    return text


def whole_number_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """A whole number in lo..hi (hi None: no upper end)."""
    accepted = f"{lo}-{hi}" if hi is not None else f"{lo} or more"

    @examples(str(lo), str(lo - 1), "x", *(() if hi is None else (str(hi + 1),)))
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; accepted: "
                                             f"{accepted}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{value} is out of range; accepted: {accepted}")
        return value
    return check


@examples("1", "abc", "0", "-3")
def pid_arg(text: str) -> int:
    """A process id (a positive integer)."""
    try:
        pid = int(text)
    except ValueError:
        pid = 0
    if pid < 1:
        raise argparse.ArgumentTypeError(f"a process id (a positive integer), got {text!r}")
    return pid


@examples("1200x720", "99999x99999", "1x1", "big")
def picture_size_arg(text: str) -> str:
    """A picture's WIDTHxHEIGHT within the timeline's limits (engine.diagnostics.timeline),
    returned as written: the report command parses it again."""
    from .diagnostics.timeline import parse_size

    try:
        parse_size(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--size {text!r}: ")
                                         .removeprefix("--size ")) from None
    return text
