"""`python -m engine info`: the GL renderer, its compressed formats, the device profile,
VRAM and what a budget comes to on this device."""
from __future__ import annotations

import argparse
import json

from ..cli_args import budget_arg
from ..memory.budget import DEFAULT_BUDGET
from ..memory.sizes import format_bytes


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="GL renderer, compressed formats, VRAM and budget")
    p.add_argument("--json", action="store_true")
    p.add_argument("--budget", default=DEFAULT_BUDGET, type=budget_arg,
                   help='"512MiB" or "80%%" of detected VRAM')
    p.add_argument("--headless", action="store_true", help="force EGL even with a display")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..gl.device import Device
    from ..memory.budget import Budget
    from ..memory.nvml import probe_nvml

    dev = Device.headless() if args.headless else Device.auto()
    try:
        reading = dev.vram()
        budget = Budget.on_device(dev, args.budget)
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
        _print(data, nvml.summary())
    return 0


def _print(data: dict, nvml: str) -> None:
    """info's human-readable lines."""
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
    print(f"NVML          {nvml}")


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
