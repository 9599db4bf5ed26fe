"""The outsider of benchmarks/device_share.sh: a PyTorch process beside a share group that
takes and frees most of the GPU's free memory in steps, one JSON line per step.

    python -m lab.share_outsider --wait 20 --hold 4 --leave 16GiB,2GiB,512MiB,32MiB

After `--wait` seconds (the members start meanwhile) it allocates until only each `--leave`
figure is free, holds it `--hold` seconds, then frees back up in reverse order. The group's
members see it only through the driver (NVX), as outside pressure; NVML names it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def parse(text: str) -> int:
    units = {"gib": 1 << 30, "mib": 1 << 20, "kib": 1 << 10, "": 1}
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(float(num) * units[t[len(num):]])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait", type=float, default=20.0)
    ap.add_argument("--hold", type=float, default=4.0)
    ap.add_argument("--leave", default="16GiB,2GiB,512MiB,32MiB")
    args = ap.parse_args()
    import torch

    leaves = [parse(x) for x in args.leave.split(",")]
    time.sleep(args.wait)
    chunks: list = []

    def say(step: str, **kw) -> None:
        free, total = torch.cuda.mem_get_info()
        print(json.dumps({"t": time.monotonic(), "pid": os.getpid(), "step": step,
                          "held": sum(c.numel() for c in chunks), "free": free,
                          "total": total, **kw}), flush=True)

    say("start")
    for leave in leaves:
        free, _ = torch.cuda.mem_get_info()
        take = max(0, free - leave)
        try:
            x = torch.empty(take, dtype=torch.uint8, device="cuda")
            x.fill_(1)
            torch.cuda.synchronize()
            chunks.append(x)
            say("took", leave=leave, bytes=take)
        except torch.cuda.OutOfMemoryError as exc:
            say("refused", leave=leave, bytes=take, error=str(exc)[:200])
        time.sleep(args.hold)
    while chunks:
        chunks.pop()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        say("freed")
        time.sleep(args.hold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
