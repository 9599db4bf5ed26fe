#!/usr/bin/env bash
# `engine view` of 10,000 phone-sized JPEGs on the H200 host (issue 34's first-frame goals:
# <= 1 s cold, <= 0.5 s warm), one device call under 4 minutes. Carry and prepare as for
# device_view.sh, then:
#   bash benchmarks/device_view10k.sh [N]
# Writes $OUT/view10k_{cold,second,warm}.{json,txt}: N (default 10,000) generated 4000x3000
# JPEGs, every 10th with an EXIF thumbnail, shown headless for 30 frames under 256 MiB
# without full detail: from an empty cache (cold); with every thumbnail cached but no atlas
# (second: the run after a cold one; its atlas is made after its first frame and finished
# as it ends); with the atlas cached (warm). summary.first_frame_s is process start to the
# first frame, summary.first_frame_placeholders what it drew as placeholders.
set -uo pipefail
N=${1:-10000}
ENGINE_CACHE=/tmp/view-cache
source "$(dirname "$0")/device_env.sh"
rm -rf /tmp/view-cache /tmp/p10k
timeout 200 python3 -m lab.view_data photos /tmp/p10k "$N" 4000 3000 10
echo "photos made at $(( $(date +%s) - t0 )) s"
view() {  # view RUN: one headless run, its report and its /usr/bin/time -v
  timeout "$(left 230)" /usr/bin/time -v python3 -m engine view /tmp/p10k --headless \
    --frames 30 --budget 256MiB --no-detail --report "$OUT/view10k_$1.json" \
    > "$OUT/view10k_$1.txt" 2>&1
  echo "view $1 rc $? at $(( $(date +%s) - t0 )) s"
}
view cold
# every thumbnail made (a pool of every core) and its atlas, then the atlas removed
timeout "$(left 200)" python3 -c "
from engine.view.wall import ImageWall
ImageWall(['/tmp/p10k'], progress=False).make_thumbnails()" || echo "thumbnails rc $?"
echo "thumbnails made at $(( $(date +%s) - t0 )) s"
rm -rf /tmp/view-cache/view/v*/atlas
view second
view warm
python3 - "$OUT" <<'PY'
import json, sys
for run in ("cold", "second", "warm"):
    try:
        s = json.load(open(f"{sys.argv[1]}/view10k_{run}.json"))["summary"]
        print(run, "first_frame_s", s.get("first_frame_s"), "placeholders",
              s.get("first_frame_placeholders"), "peak", s["peak_bytes"],
              "over", s["over_budget_frames"], "leaks", s["leaked_objects"])
    except Exception as exc:
        print(run, "no report:", exc)
PY
grep -H -E "Elapsed|Maximum resident" "$OUT"/view10k_*.txt
rm -rf /tmp/p10k
