"""Command line: `python -m engine info | demo | view | bake | inspect | bench | report |
soak | monitor`.

One rule for every subcommand (tests/test_cli_rule.py walks every option to hold it):

- A user error (a value out of range, an unknown name, an output that cannot be written) is
  ONE line on stderr naming the option and what it accepts, exit status 2, no traceback, and
  it is found before any work starts: values are checked by the argument types below while
  parsing, so nothing has been generated, allocated or written when they fail.
- An internal error is one line plus "run with --debug for the traceback", exit status 1;
  `--debug` (anywhere on the line) prints the traceback instead.
- Ctrl-C and SIGTERM stop the run at once: the handler stops this process's worker processes
  (a process pool would otherwise finish its queue, or outlive us), then unwinds the main
  thread so every `finally` releases what it made and outputs written to temporary names are
  never renamed into place; exit status 130 (SIGINT) or 143 (SIGTERM) with one line, and the
  process ends there without joining threads a killed pool may have left blocked
  (`entry_point`).
- A closed stdout (`inspect f.ktx2 | head -3`) ends the command quietly, status 141 (as a
  C tool killed by SIGPIPE).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from .cli_args import (
    add_trace_option,
    budget_arg,
    examples,
    input_file,
    output_file,
    positive_int,
    probability_arg,
    seed_arg,
    size_arg,
    texture_size_arg,
)
from .cli_process import Interrupted, install_signal_handlers, stopping
from .diagnostics.files import atomic_text
from .errors import BudgetError, EngineError, OutputExistsError, UsageError
from .memory.sizes import format_bytes

log = logging.getLogger(__name__)

class OneLineParser(argparse.ArgumentParser):
    """argparse, but a parse error is raised as UsageError (one line from main, exit 2)
    instead of a usage block on stderr and SystemExit. Subparsers inherit the class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # "-5x10" is a (bad) value, not an unknown option: anything starting "-<digit>" is
        # taken as a value, so its type says what is wrong instead of "expected one argument".
        self._negative_number_matcher = re.compile(r"^-\d")

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


# --------------------------------------------------------------------------- commands
def _info(args: argparse.Namespace) -> int:
    from .gl.device import Device
    from .memory.budget import Budget
    from .memory.nvml import probe_nvml

    dev = Device.headless() if args.headless else Device.auto()
    try:
        reading = dev.vram()
        budget = Budget(args.budget, vram_total=reading.total_bytes)
        caps = dev.caps
        nvml = probe_nvml(renderer=caps.renderer)
        data = {
            "renderer": caps.renderer,
            "vendor": caps.vendor,
            "gl_version": caps.gl_version,
            "glsl_version": caps.glsl_version,
            "context": dev.handle.mode,
            # what this driver gets: draw and feedback paths, compute, staging, and what each
            # source format is served as (engine/gl/profile.py)
            "profile": dev.profile.as_dict(),
            "compressed_formats": caps.compressed_families,
            "compressed_format_variants": sorted(caps.compressed),
            "max_texture_size": caps.max_texture_size,
            "sparse_texture": caps.sparse_texture,
            "copy_image": caps.copy_image,
            "buffer_storage": caps.buffer_storage,
            "debug_output": caps.debug_output,
            "vram": {"source": reading.source, "total_bytes": reading.total_bytes,
                     "available_bytes": reading.available_bytes},
            "budget": str(budget.spec),
            "budget_bytes": budget.bytes,
            # What a percentage budget is taken of: probed VRAM, or the virtual size where
            # the driver reports none (llvmpipe).
            "budget_reference_bytes": budget.reference_total,
            "budget_reference": "probed" if budget.vram_total else "virtual",
            # NVML's view beside the driver's: total, free, and the other processes holding
            # memory on this GPU; or the reason there is none (no NVIDIA driver, llvmpipe).
            "nvml": nvml.as_dict(),
        }
    finally:
        dev.shutdown()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        v = data["vram"]
        print(f"renderer      {data['renderer']} ({data['vendor']})")
        print(f"GL            {data['gl_version']} via {data['context']}")
        print(f"compressed    {', '.join(data['compressed_formats']) or 'none'}")
        print(f"max texture   {data['max_texture_size']}")
        for line in profile_lines(data["profile"]):
            print(line)
        print(f"features      sparse={data['sparse_texture']} copy_image={data['copy_image']} "
              f"buffer_storage={data['buffer_storage']} debug={data['debug_output']}")
        print(f"VRAM          source={v['source'] or 'none'} total={format_bytes(v['total_bytes'])}"
              f" available={format_bytes(v['available_bytes'])}")
        print(f"budget        {data['budget']} = {format_bytes(data['budget_bytes'])} (of "
              f"{data['budget_reference']} {format_bytes(data['budget_reference_bytes'])})")
        print(f"NVML          {nvml.summary()}")
    return 0


def profile_lines(p: dict) -> list[str]:
    """`info`'s lines of the device profile (`DeviceProfile.as_dict`)."""
    fb = {k: v for k, v in p["served"].items() if v != k}
    served = ", ".join(f"{k} as {v}" for k, v in fb.items() if v != "-") or "every format as itself"
    lost = [k for k, v in fb.items() if v == "-"]
    return [
        f"GLSL          {p['glsl_version'] // 100}.{p['glsl_version'] % 100:02d}",
        f"draw path     {p['draw_path']}" + (" (batched indirect multi-draws)"
                                             if p["draw_path"] == "batched"
                                             else " (a draw call per object)"),
        f"feedback      {p['feedback_path']}, reduced on the {p['feedback_reduce'].upper()}",
        f"compute       {'yes (GPU encoder available)' if p['compute'] else 'no (CPU encoder)'}",
        f"staging       {'persistently mapped ring' if p['staging'] == 'persistent' else 'plain uploads'}",
        f"bindless      {'yes' if p['bindless'] else 'no'}",
        f"served        {served}" + (f"; cannot serve {', '.join(lost)}" if lost else ""),
        f"missing       {', '.join(p['missing']) or 'nothing'}",
    ]


def _describe(info: dict) -> str:
    """inspect()'s dict as a few readable lines and a level table."""
    head = (f"{info['path']}: {info['container']} {info['format']} {info['width']}x"
            f"{info['height']} layers={info.get('layers', 1)} faces={info.get('faces', 1)} "
            f"supercompression={info.get('supercompression', 'none')}")
    rows = [head, f"  {'level':>5} {'size':>11} {'offset':>10} {'stored':>10} {'bytes':>10}"]
    for lv in info["levels"]:
        rows.append(f"  {lv['index']:>5} {str(lv['width']) + 'x' + str(lv['height']):>11} "
                    f"{lv['offset']:>10} {lv['stored_bytes']:>10} {lv['uncompressed_bytes']:>10}")
    return "\n".join(rows)


def _inspect(args: argparse.Namespace) -> int:
    from .errors import TextureFormatError
    from .textures import inspect

    status = 0
    for path in args.files:
        try:
            info = inspect(path)
            print(json.dumps(info, indent=2) if args.json else _describe(info))
        except TextureFormatError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


def _harden_report(parser: argparse.ArgumentParser) -> None:
    """The report subcommand's parser lives in engine.diagnostics.timeline (a lower layer
    that cannot see this module): give its options the same checked types here."""
    from .diagnostics.timeline import parse_size as timeline_size

    @examples("1200x720", "99999x99999", "1x1", "big")
    def picture_size(text: str) -> str:
        try:
            timeline_size(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--size {text!r}: ")
                                             .removeprefix("--size ")) from None
        return text  # the command parses it again, as it always did

    for action in parser._actions:
        if action.dest == "size":
            action.type = picture_size
        elif action.dest == "report":
            action.type = input_file
        elif action.dest == "output":
            action.type = output_file


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m engine", description=__doc__.split("\n\n")[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (also accepted after the "
                        "subcommand)")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="GL renderer, compressed formats, VRAM and budget")
    info.add_argument("--json", action="store_true")
    info.add_argument("--budget", default="80%", type=budget_arg,
                      help='"512MiB" or "80%%" of detected VRAM')
    info.add_argument("--headless", action="store_true", help="force EGL even with a display")
    info.set_defaults(func=_info)
    from .demos.cli import add_parser as add_demo
    add_demo(sub)
    from .view.cli import add_parser as add_view
    add_view(sub)
    # `bake` is dispatched in main() before parsing; listed here for --help.
    sub.add_parser("bake", help="images -> mip chain -> BCn -> KTX2 (see bake --help)")
    insp = sub.add_parser("inspect", help="container, format, levels of KTX2/DDS files")
    insp.add_argument("files", nargs="+", type=input_file)
    insp.add_argument("--json", action="store_true")
    insp.set_defaults(func=_inspect)
    from .bench.harness import add_parser as add_bench
    add_bench(sub)
    from .diagnostics.timeline import add_parser as add_report
    add_report(sub)
    _harden_report(sub.choices["report"])
    _add_soak(sub)
    from .diagnostics.monitor import add_parser as add_monitor
    add_monitor(sub)
    for action in sub.choices["monitor"]._actions:  # its parser lives below this module
        if action.dest == "out":
            action.type = output_file
    return p


# --------------------------------------------------------------------------- soak
SOAK_SCENES = ("pressure", "wall")


def _add_soak(sub: Any) -> None:
    from .app.soak import SoakSettings

    d = SoakSettings()
    p = sub.add_parser("soak", help="a long run under random budgets and injected faults; "
                                    "exit 0 only if every check holds")
    p.add_argument("--scene", choices=SOAK_SCENES, default="pressure",
                   help="pressure: the gallery under moving budgets (default); wall")
    p.add_argument("--frames", type=positive_int, default=d.frames,
                   help=f"frames to run, 1 or more (default {d.frames})")
    p.add_argument("--size", type=size_arg, default=d.size, help="output WxH (default 320x180)")
    p.add_argument("--count", type=positive_int, default=16, help="textures in the scene")
    p.add_argument("--texture-size", type=texture_size_arg, default=256,
                   help="texture edge, a power of two (default 256)")
    p.add_argument("--seed", type=seed_arg, default=d.seed, help="random seed (default 1)")
    p.add_argument("--oom", type=probability_arg, default=d.oom_probability,
                   help="probability that an allocation of a streamed texture or render target "
                        f"fails as out of memory, in [0, 1] (default {d.oom_probability})")
    p.add_argument("--io-fault-every", type=positive_int, default=d.io_fault_every,
                   help=f"frames between I/O faults (default {d.io_fault_every})")
    p.add_argument("--budget-every", type=positive_int, default=d.budget_every,
                   help=f"frames between random budget changes (default {d.budget_every})")
    p.add_argument("--resize-every", type=positive_int, default=None,
                   help="frames between output resizes, as a window resize does (default: none "
                        "headless)")
    p.add_argument("--json", type=output_file, help="write the summary as JSON to this file")
    add_trace_option(p)
    p.set_defaults(func=_soak)


def _soak_scene(args: argparse.Namespace, into: Path) -> tuple[Any, dict, dict]:
    """The scene factory, options reading the soak's own copy of the textures (they get
    damaged) and options reading the cache (the clean reference frame)."""
    if args.scene == "wall":
        from .demos import wall
        from .demos.wall_assets import wall_textures

        assets = wall_textures(args.count, args.texture_size)
        factory = wall.build
    else:
        from .demos import gallery
        from .demos.gallery_assets import gallery_textures

        assets = gallery_textures(args.count, args.texture_size, "bc7")
        factory = gallery.build
    copy = into / assets.directory.parent.name
    from .app.soak import copy_textures

    copy_textures(assets.paths, copy / assets.directory.name)
    base = {"count": args.count, "texture_size": args.texture_size, "frames": args.frames}
    return factory, {**base, "cache_dir": copy}, {**base, "cache_dir": assets.directory.parent}


def _soak(args: argparse.Namespace) -> int:
    import tempfile

    from .app.soak import SoakSettings, run_soak
    from .gl.device import Device

    settings = SoakSettings(frames=args.frames, size=args.size, seed=args.seed,
                            oom_probability=args.oom, io_fault_every=args.io_fault_every,
                            budget_every=args.budget_every, resize_every=args.resize_every or 0,
                            trace=args.trace)
    say = logging.getLogger("engine.progress").info
    with tempfile.TemporaryDirectory(prefix="engine-soak-") as tmp:
        factory, options, clean = _soak_scene(args, Path(tmp))
        say(f"soak: {args.scene}, {settings.frames} frames at {args.size[0]}x{args.size[1]}, "
            f"textures copied to {tmp}")
        device = Device.headless()
        try:
            report = run_soak(device, factory, options, settings, reference_options=clean,
                              say=say)
        finally:
            device.shutdown()
    for line in report.lines():
        print(line)
    if args.json:
        data = {**report.to_json(), "scene": args.scene, "renderer": report_renderer(device)}
        atomic_text(args.json, json.dumps(data, indent=1))
        say(f"soak summary written to {args.json}")
    return 0 if report.passed else 1


def report_renderer(device: Any) -> str:
    return str(getattr(getattr(device, "caps", None), "renderer", ""))


# --------------------------------------------------------------------------- main
#: Errors that are the user's to fix (an argument, a file they named): one line, exit 2.
USER_ERRORS: tuple[type[BaseException], ...] = (UsageError, BudgetError, OutputExistsError,
                                                argparse.ArgumentTypeError)


def _user_os_error(exc: BaseException) -> bool:
    """An OSError about a path the user named (exists, permission, not a folder)."""
    return isinstance(exc, (FileExistsError, PermissionError, NotADirectoryError,
                            IsADirectoryError)) and getattr(exc, "filename", None) is not None


def _say(message: str) -> None:
    print(" ".join(str(message).split()), file=sys.stderr)


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["bake"]:  # bake owns its whole argument list (and its --help)
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        if any(a.lower().endswith((".gltf", ".glb")) for a in argv[1:]):  # a whole scene
            from .render.gltf_bake import bake_gltf_main
            return bake_gltf_main(argv[1:])
        from .gl.bc_encode import chain_encoder
        from .textures.bake import bake_main
        return bake_main(argv[1:], gpu_encoder=chain_encoder)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    previous = install_signal_handlers() if _is_main_thread() else {}
    try:
        return _dispatch(argv)
    except Interrupted as exc:
        _say(f"interrupted by {exc}: stopped, partial outputs removed")
        return exc.status
    except KeyboardInterrupt:
        _say("interrupted by SIGINT: stopped, partial outputs removed")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing more, and keep the interpreter's
        # final flush from complaining about the closed pipe.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except USER_ERRORS as exc:
        _say(f"error: {exc}")
        return 2
    except OSError as exc:
        if _user_os_error(exc):
            _say(f"error: {exc}")
            return 2
        return _internal(exc, debug)
    except EngineError as exc:  # raised on purpose with a message for the user
        if debug:
            raise
        _say(f"error: {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 - the CLI's last word on an internal error
        return _internal(exc, debug)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _internal(exc: BaseException, debug: bool) -> int:
    if debug:
        import traceback

        traceback.print_exception(exc)
        return 1
    _say(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
    return 1


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def entry_point() -> NoReturn:
    """`python -m engine`: main(), then the process ends. After SIGINT/SIGTERM it ends at
    once (os._exit, once the outputs are flushed): every `finally` has already released
    what it made, and the interpreter's own exit would join threads a killed process pool
    may have left blocked forever (engine.textures.bake.closing_pool)."""
    status = main()
    if stopping():
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry_point()
