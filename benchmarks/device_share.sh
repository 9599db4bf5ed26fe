#!/usr/bin/env bash
# Share groups on the H200 (issue 26), one device call, under 5 minutes: the exchange cost,
# then lab.share's scenario (members of weights 1, 1, 1, 2 join and leave, one is
# killed with SIGKILL, a modest member joins) beside a PyTorch outsider that takes and frees
# most of the free GPU memory in steps (lab/share_outsider.py), NVML sampled meanwhile.
# Run on the device machine from the checkout's copy, with `.gl`, `.whl` (nvidia-ml-py) and
# `.devsrc.tar` (`git archive -o .devsrc.tar HEAD`) carried, as benchmarks/device_round.sh:
#     bash benchmarks/device_share.sh
# Writes to $OUT: share_cost_h200.json (microseconds per exchange), share_h200/share.json (the
# phases: shares, grants, settle times; sums: group_over_instants and
# member_frames_over_effective, both must be 0; nvml: the outsider's pid, name and bytes),
# share_h200/*.jsonl (every member's frames, nvml.jsonl), share_h200/outsider.log, and
# share_h200_summary.txt.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu_share.csv" 2>&1

if [ -z "${SHARE_SKIP_COST:-}" ]; then
  timeout 30 python3 -m lab.share cost > "$OUT/share_cost_h200.json" 2>&1
  echo "cost rc $? at $(( $(date +%s) - t0 )) s"
fi
# Members: the gallery at 640x360, 48 BC7 textures of 2048^2 (about 270 MiB at full detail)
# and a -6 mip bias, so each wants more than its share of the 512 MiB group budget; the
# floor covers what a member allocates before its first frame. The outsider starts taking
# memory once the first members draw and is done after about 40 s.
# SHARE_BUDGET, SHARE_FLOOR, SHARE_COUNT and SHARE_TEXTURE_SIZE set a smaller group (issue 33:
# 64MiB, 2MiB, 24, 1024: the gallery members of the llvmpipe profile, each wanting more than
# its 16 MiB share); SHARE_SKIP_COST=1 skips the exchange cost.
timeout $(left 280) python3 -m lab.share run --out "$OUT/share_h200" \
  --budget "${SHARE_BUDGET:-512MiB}" --floor "${SHARE_FLOOR:-48MiB}" --hold 5 --size 640 360 \
  --count "${SHARE_COUNT:-48}" --texture-size "${SHARE_TEXTURE_SIZE:-2048}" \
  --outsider python3 -m lab.share_outsider --wait 12 --hold 4 \
  --leave 16GiB,2GiB,512MiB,32MiB > "$OUT/share_h200_summary.txt" 2>&1
echo "share rc $? at $(( $(date +%s) - t0 )) s"
python3 - "$OUT/share_h200/share.json" <<'PY' >> "$OUT/share_h200_summary.txt" 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
s = r["sums"]
print("group over-budget instants:", s["group_over_instants"], "max sum", s["max_sum_bytes"],
      "of", r["budget_bytes"], "; member frames over their effective budget:",
      s["member_frames_over_effective"])
for p in r["phases"]:
    print(p["phase"], "grant settle s", p["grant_settle_s"], "usage reach s", p["usage_reach_s"])
print("nvml:", json.dumps(r["nvml"]))
PY
tail -c 3000 "$OUT/share_h200_summary.txt"
