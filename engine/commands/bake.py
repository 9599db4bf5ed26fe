"""`python -m engine bake INPUT... -o OUTDIR`: images (or a glTF scene) to streamable KTX2.

The texture layer (engine.textures.bake) and the render layer (engine.render.gltf_bake)
keep the library APIs; this module is the command: its options, checked while parsing,
the table it prints and its exit status (0 every file baked, 1 an unreadable input, 2 bad
arguments). Interrupted (Ctrl-C, or SIGTERM through engine.cli's handler, which stops the
worker processes first), it removes the temporary files of unfinished outputs and
re-raises; finished outputs are whole files and stay.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from ..cli_args import image_input, output_folder, whole_number_in
from ..errors import EngineError, GltfError, TextureFormatError, UsageError, install_hint
from ..memory.sizes import format_bytes
from ..textures.bake import (
    STRIP_BAKE_PIXELS,
    BakeResult,
    bake_many,
    closing_pool,
    is_interrupt,
    process_pool,
)
from ..textures.bake_plan import BASIS_CHOICES, FORMAT_CHOICES
from ..textures.source_image import NAMED_FILE_MAX_PIXELS, TONEMAPS, image_files

#: Values of --encoder: where bc1/bc7 blocks are encoded.
ENCODER_CHOICES = ("cpu", "gpu")
SCENE_SUFFIXES = (".gltf", ".glb")

EPILOG = ("Inputs: 8-bit images are used as they are; 16-bit images (PNG, TIFF) are scaled to "
          "8 bits with rounding, never clipped; float images (float TIFF) are linear light: "
          "values in [0, 1] are stored (sRGB-encoded for --srgb), values a format cannot hold "
          "are refused unless --tonemap says what to do (every format here is 8-bit unsigned; "
          "etcpak has no BC6H encoder). 16-bit colour PNG/TIFF at full precision, RGB float "
          "TIFF and Radiance .hdr need the 'hdr' extra (imagecodecs). PSNR is measured against "
          "the input at its own precision: inf only when stored exactly. A glTF scene "
          "(.gltf/.glb, alone) has its PNG/JPEG textures baked to KTX2 (bc7 for the engine, or "
          "uastc/etc1s with KHR_texture_basisu for other viewers); its images stay as the "
          "fallback.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bake", help="images -> mip chain -> BCn -> KTX2 (see bake --help)",
                       description="Bake images to mipmapped, BCn-compressed KTX2 textures.",
                       epilog=EPILOG)
    p.add_argument("inputs", nargs="+", metavar="INPUT", type=image_input,
                   help="image files (PNG, JPEG, ...) or folders of them (walked "
                        "recursively), files up to --max-pixels; or one glTF scene")
    p.add_argument("-o", "--out", required=True, metavar="OUTDIR", type=output_folder,
                   help="output directory")
    p.add_argument("--format", default="bc7", choices=FORMAT_CHOICES,
                   help="block format (default bc7); bc4/bc5 are always linear; uastc "
                        "(zstd-supercompressed) and etc1s (BasisLZ) write Basis Universal "
                        "KTX2 for glTF's KHR_texture_basisu (extra 'basis')")
    space = p.add_mutually_exclusive_group()
    space.add_argument("--srgb", dest="srgb", action="store_true", default=True,
                       help="colour texture: sRGB format, mips filtered in linear light (default)")
    space.add_argument("--linear", dest="srgb", action="store_false",
                       help="data texture: linear format, no sRGB conversion")
    p.add_argument("--normal-map", action="store_true",
                   help="tangent-space normal map: mips filtered as unit vectors")
    p.add_argument("--tonemap", choices=TONEMAPS, default=None,
                   help="float inputs with values above 1 (HDR) or below 0: reinhard "
                        "(x/(1+x) per channel), aces (Narkowicz's ACES filmic fit, clipped) or "
                        "clamp (clip to [0, 1]); without it such inputs are refused")
    p.add_argument("--zstd", type=whole_number_in(1, 22), default=None, metavar="LEVEL",
                   help="zstd-supercompress each level at this level (1-22)")
    p.add_argument("--jobs", type=whole_number_in(1), default=None, metavar="N",
                   help="worker processes (default: all cores)")
    p.add_argument("--encoder", choices=ENCODER_CHOICES, default="cpu",
                   help="where bc1/bc7 blocks are encoded: cpu (etcpak on the worker "
                        "processes, default) or gpu (compute shaders, GL 4.3, in this "
                        "process; decoding, mips and writing stay on the workers). "
                        "`python -m lab bench encode` measures which is faster here. "
                        "Other formats, images over the GPU's texture size limit and "
                        "files baked by strips are encoded on the CPU either way")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar on stderr")
    p.add_argument("--max-pixels", type=whole_number_in(1), default=NAMED_FILE_MAX_PIXELS,
                   metavar="N",
                   help=f"largest image read, in pixels (default {NAMED_FILE_MAX_PIXELS}, a "
                        f"32768 x 32768 image; Pillow's decompression-bomb guard is for files "
                        f"from strangers, not files you name). Images of {STRIP_BAKE_PIXELS} "
                        f"pixels or more are read, filtered, encoded and written by strips "
                        f"when pyvips is installed (extra 'huge'), with memory that does not "
                        f"grow with the image")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if any(str(i).lower().endswith(SCENE_SUFFIXES) for i in args.inputs):
        return _bake_scene(args)
    _check_encoder(args)
    wall = time.perf_counter()
    try:
        inputs = _expand_inputs(args.inputs)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    made = _missing_dirs(Path(args.out))  # removed again if the bake fails
    workers = args.jobs or os.cpu_count() or 1
    encoder = ExitStack()
    try:
        encode_chain = encoder.enter_context(_gpu_encoder()) if args.encoder == "gpu" else None
    except EngineError as exc:  # no context, or no compute shaders
        print(f"error: --encoder gpu: {exc}", file=sys.stderr)
        _remove_empty(made)
        return 1
    with encoder, closing_pool(process_pool(workers, clean=encode_chain is not None)) as pool:
        try:
            results = bake_many(inputs, args.out, args.format, args.srgb, args.zstd,
                                normal_map=args.normal_map, executor=pool, jobs=workers,
                                progress=args.progress, tonemap=args.tonemap,
                                max_pixels=args.max_pixels, encode_chain=encode_chain)
        except (TextureFormatError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            _remove_empty(made)
            return 1
        except BaseException as exc:
            if not is_interrupt(exc):  # stop the queue before removing what it wrote
                pool.shutdown(wait=False, cancel_futures=True)
            _remove_partials(Path(args.out), inputs)
            _remove_empty(made)
            raise
    wall = time.perf_counter() - wall
    print(_table(results))
    mpx = sum(r.width * r.height for r in results) / 1e6
    print(f"{len(results)} file(s), {mpx:.1f} Mpx in {wall:.2f} s wall "
          f"({mpx / wall if wall > 0 else float('inf'):.1f} Mpx/s)")
    return 0


def _check_encoder(args: argparse.Namespace) -> None:
    """UsageError before any work for a format or encoder this machine cannot write."""
    if args.format in BASIS_CHOICES:  # the encoder is optional
        from ..textures import basis

        if not basis.encoder_available():
            raise UsageError(f"--format {args.format} needs the Basis encoder alktx2: "
                             f"{install_hint('basis')} (it has wheels for x86_64 Linux and "
                             f"Windows)")
    if args.encoder == "gpu" and args.format not in ("bc1", "bc7"):
        raise UsageError(f"--encoder gpu writes bc1 and bc7, not {args.format}")


def _gpu_encoder():
    """The GPU chain encoder of `--encoder gpu` (a GL context and its programs)."""
    from ..gl.bc_encode import chain_encoder

    return chain_encoder()


def _bake_scene(args: argparse.Namespace) -> int:
    """One glTF scene's images to KTX2 (engine.render.gltf_bake)."""
    from ..render.gltf_bake import FORMATS, bake_gltf

    if len(args.inputs) != 1:
        raise UsageError("INPUT: a glTF scene is baked alone; accepted: one .gltf/.glb file, "
                         "or image files and folders")
    if args.format not in FORMATS:
        raise UsageError(f"--format {args.format}: a glTF scene is baked to "
                         f"{', '.join(FORMATS)}")
    _check_encoder(args)
    try:
        result = bake_gltf(args.inputs[0], args.out, args.format, zstd_level=args.zstd)
    except (GltfError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for r in result.images:
        print(f"{r.output.name:<36} {r.format:<12} {r.width}x{r.height} {r.psnr_db:6.2f} dB")
    print(f"{result.gltf} ({result.extension}, {len(result.images)} image(s))")
    return 0


def _table(results: Sequence[BakeResult]) -> str:
    header = (f"{'file':<28} {'format':<14} {'size':>11} {'lv':>3} {'bytes':>11} {'sec':>7} "
              f"{'Mpx/s':>7} {'PSNR dB':>8}")
    lines = [header, "-" * len(header)]
    for r in results:
        name = Path(r.output).name
        lines.append(f"{name[:28]:<28} {r.format:<14} {f'{r.width}x{r.height}':>11} "
                     f"{r.levels:>3} {format_bytes(r.bytes):>11} {r.seconds:>7.2f} "
                     f"{r.mpx_per_s:>7.1f} {r.psnr_db:>8.2f}")
    return "\n".join(lines)


def _expand_inputs(inputs: Sequence[str]) -> list[str]:
    """Files as given, folders as the images in them (recursively). Two inputs that would
    write the same output name are refused before any work."""
    files: list[str] = []
    for text in inputs:
        if Path(text).is_dir():
            found = image_files(text)
            if not found:
                raise ValueError(f"{text!r}: a folder with no images in it")
            files += [os.fspath(p) for p in found]
        else:
            files.append(text)
    seen: dict[str, str] = {}
    for f in files:
        stem = Path(f).stem
        if stem in seen and seen[stem] != f:
            raise ValueError(f"{seen[stem]!r} and {f!r} would both be written as {stem}.ktx2; "
                             f"bake them into different folders")
        seen[stem] = f
    return list(dict.fromkeys(files))


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, innermost first."""
    out = []
    p = path.absolute()
    while not p.exists() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def _remove_empty(dirs: Sequence[Path]) -> None:
    """Remove the folders a failed bake made, innermost first, while they are empty."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


def _remove_partials(out: Path, inputs: Sequence[str]) -> None:
    """Temporary files of outputs a stopped bake was writing (workers write `X.ktx2.tmp*`
    and rename): a half-written texture never stays behind."""
    for stem in {Path(i).stem for i in inputs}:
        for tmp in out.glob(f"{stem}.ktx2.tmp*"):
            tmp.unlink(missing_ok=True)
