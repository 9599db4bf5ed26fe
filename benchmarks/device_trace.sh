#!/usr/bin/env bash
# The cost of watching a run on the H200 (issue 25), in one device call of under 6 minutes:
#  1. lab.observe: the pressure demo at 1920x1080 with 64 streamed 1024 px textures,
#     state file and trace off / state file only / both, interleaved rounds, medians
#     (observe_h200.json);
#  2. a traced pressure demo in the background, seen by `monitor --once --json` while it runs
#     (NVX/NVML pressure included), then its trace validated and its last counters checked
#     against its report (trace_h200.json, trace_check_h200.txt, monitor_h200.jsonl).
# Run on the device machine from the checkout's copy, with `.gl`, `.whl`
# (../shared/tools/device-prep.sh tqdm nvidia-ml-py) and `.devsrc.tar` (`git archive -o
# .devsrc.tar HEAD`) carried, as for benchmarks/device_round.sh:  bash benchmarks/device_trace.sh
# Outputs go to $OUT.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu_trace.csv" 2>&1
python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(64, 1024, 'bc1', progress=False)"
echo "assets at $(( $(date +%s) - t0 )) s"

timeout $(left 200) python3 -m lab.observe --size 1920x1080 --count 64 --texture-size 1024 \
  --frames 300 --rounds 3 --json "$OUT/observe_h200.json" > "$OUT/observe_h200.txt" 2>&1
echo "observe rc $? at $(( $(date +%s) - t0 )) s"

timeout $(left 320) python3 -m engine demo pressure --headless --frames 1500 --size 1920x1080 \
  --count 64 --texture-size 1024 --format bc1 --hud --report "$OUT/pressure_trace_report_h200.json" \
  --trace "$OUT/trace_h200.json" > "$OUT/pressure_trace_h200.txt" 2>&1 &
demo=$!
for i in $(seq 1 20); do
  sleep 2; kill -0 $demo 2>/dev/null || break
  python3 -m engine monitor --once --json >> "$OUT/monitor_h200.jsonl" 2>> "$OUT/monitor_h200.err"
done
wait $demo; echo "traced demo rc $? at $(( $(date +%s) - t0 )) s"
timeout $(left 340) python3 - "$OUT" > "$OUT/trace_check_h200.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path
from engine.diagnostics.trace import final_counters, validate_trace
out = Path(sys.argv[1])
doc = json.loads((out / "trace_h200.json").read_text())
print("events by ph", validate_trace(doc))
last = json.loads((out / "pressure_trace_report_h200.json").read_text())["frames"][-1]
final = final_counters(doc)
cats = {c: 0 for c in final["bytes by category"]} | last["by_category"]
checks = {"by_category": final["bytes by category"] == cats,
          "budget": final["budget"] == {"budget": last["budget_bytes"],
                                        "effective": last["effective_budget_bytes"]},
          "pool": final["pool"] == {"bytes": last["pool_bytes"]},
          "render_scale": final["render scale"] == {"scale": last["render_scale"]}}
print("final counters equal the report:", checks)
states = [json.loads(l) for l in (out / "monitor_h200.jsonl").read_text().splitlines() if l]
print("monitor samples", len(states), "pressure seen",
      max((s["external_pressure_bytes"] for s in states), default=None),
      "notes", {s["vram_note"] for s in states})
EOF
echo "check rc $? at $(( $(date +%s) - t0 )) s"
tail -c 3000 "$OUT"/observe_h200.txt "$OUT"/trace_check_h200.txt
