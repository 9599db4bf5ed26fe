#!/usr/bin/env bash
# `engine view` of 10,000 phone-sized JPEGs on the H200 host (issue 23's start-up goals), one
# device call under 5 minutes. Carry and prepare as for device_view.sh, then:
#   bash benchmarks/device_view10k.sh [N]
# Writes $OUT/view10k_{cold,warm}.{json,txt}: N (default 10,000) generated 4000x3000 JPEGs
# shown headless for 30 frames under 256 MiB without full detail, from a cold then a warm
# thumbnail cache; the reports' summary.first_frame_s is process start to the first frame.
set -uo pipefail
N=${1:-10000}
ENGINE_CACHE=/tmp/view-cache
source "$(dirname "$0")/device_env.sh"
rm -rf /tmp/view-cache /tmp/p10k
timeout 200 python3 -m lab.view_data photos /tmp/p10k "$N" 4000 3000
echo "photos made at $(( $(date +%s) - t0 )) s"
for run in cold warm; do
  timeout $(left 280) /usr/bin/time -v python3 -m engine view /tmp/p10k --headless --frames 30 \
    --budget 256MiB --no-detail --report "$OUT/view10k_$run.json" > "$OUT/view10k_$run.txt" 2>&1
  echo "view $run rc $? at $(( $(date +%s) - t0 )) s"
done
python3 - "$OUT" <<'PY'
import json, sys
for run in ("cold", "warm"):
    try:
        s = json.load(open(f"{sys.argv[1]}/view10k_{run}.json"))["summary"]
        print(run, "first_frame_s", s.get("first_frame_s"), "placeholders",
              s.get("first_frame_placeholders"), "peak", s["peak_bytes"],
              "over", s["over_budget_frames"], "leaks", s["leaked_objects"])
    except Exception as exc:
        print(run, "no report:", exc)
PY
grep -h -E "Elapsed|Maximum resident" "$OUT"/view10k_*.txt
rm -rf /tmp/p10k
