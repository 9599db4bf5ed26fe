#!/usr/bin/env bash
# `engine view`'s start-up and zoom goals (issue 34) on the H200 host, one device call under
# 8 minutes. Carry and prepare as for device_view10k.sh, then:  bash benchmarks/device_view_goals.sh
#   cold     10,000 generated 4000x3000 JPEGs, an empty cache, shown headless for 30 frames
#            under 256 MiB: the report's first_frame_s (process start to the first frame)
#   thumbs   the same folder, an empty cache again: every thumbnail made through the API
#            (ImageWall.make_thumbnails, all cores), seconds to the last one
#   warm     the same folder shown as in cold, thumbnails cached
#   zooms    python -m lab.viewers --viewers engine --parts photos: 1,000 photographs,
#            zooms onto photographs not yet encoded, time to sharp p50/p95, full detail
#            encoded by the CPU workers, then by the GPU encoder
# Writes $OUT/view_goals.txt (the figures) and $OUT/view_goals_zooms_{cpu,gpu}.json.
set -uo pipefail
ENGINE_CACHE=/tmp/view-cache
source "$(dirname "$0")/device_env.sh"
SUM="$OUT/view_goals.txt"
rm -rf /tmp/view-cache /tmp/p10k
timeout 150 python3 -m lab.view_data photos /tmp/p10k 10000 4000 3000 > /dev/null 2>&1
echo "photos made at $(( $(date +%s) - t0 )) s" | tee -a "$SUM"
show() {  # $1: cold or warm
  timeout $(left $2) python3 -m engine view /tmp/p10k --headless --frames 30 --budget 256MiB \
    --no-detail --report "$OUT/view_goals_$1.json" > /dev/null 2>&1
  python3 -c "
import json; s = json.load(open('$OUT/view_goals_$1.json'))['summary']
print('$1: first_frame_s', s.get('first_frame_s'), 'placeholders', s.get('first_frame_placeholders'),
      'over', s['over_budget_frames'], 'leaks', s['leaked_objects'])" >> "$SUM" 2>&1
}
# pip compiles an installed package's modules; this copy is compiled the same way first.
python3 -m compileall -q engine lab > /dev/null
show cold 170
rm -rf /tmp/view-cache
# A file, not stdin: the process pool's workers import the main module by its path.
cat > /tmp/thumbs.py <<'PY'
import os, time
from engine.view.wall import ImageWall
if __name__ == "__main__":
    t = time.perf_counter()
    wall = ImageWall(["/tmp/p10k"], progress=False)
    made = time.perf_counter()
    wall.make_thumbnails()
    print(f"thumbs: {len(wall.items)} images on {os.cpu_count()} cores: wall made in "
          f"{made - t:.2f} s, every thumbnail and the atlas in {time.perf_counter() - made:.2f} s "
          f"more ({len(wall.problems)} problems)")
PY
timeout $(left 240) python3 /tmp/thumbs.py >> "$SUM" 2>&1
show warm 260
rm -rf /tmp/p10k
for enc in cpu gpu; do
  timeout $(left $([ $enc = cpu ] && echo 380 || echo 470)) python3 -m lab.viewers \
    --viewers engine --parts photos --photos 1000 --zooms 16 --encoder $enc \
    --json "$OUT/view_goals_zooms_$enc.json" > "$OUT/view_goals_zooms_$enc.txt" 2>&1
  echo "zooms ($enc encoder) rc $? at $(( $(date +%s) - t0 )) s" >> "$SUM"
  grep "engine zoom" "$OUT/view_goals_zooms_$enc.txt" >> "$SUM"
done
cat "$SUM"
