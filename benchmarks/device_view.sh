#!/usr/bin/env bash
# `engine view` on the H200 (issue 23), one device call, time-boxed under 5 minutes. Carry and
# prepare as for device_round.sh (.gl, .devsrc.tar, and .whl with the strip reader's wheels:
# ../shared/tools/device-prep.sh tqdm nvidia-ml-py pyvips pyvips-binary), then:
#   bash benchmarks/device_view.sh
# Writes under $OUT: view_photos_{cold,warm}.{json,txt} (1,000 generated 4000x3000 JPEGs:
# first frame from cold and warm thumbnail caches, 256 MiB budget), view_huge.{json,txt} (a
# 16384^2 PNG viewed under 128 MiB, zoomed to its centre at 1:1, /usr/bin/time -v for RSS).
set -uo pipefail
ENGINE_CACHE=/tmp/view-cache
source "$(dirname "$0")/device_env.sh"
rm -rf /tmp/view-cache /tmp/view-photos
timeout 60 python3 -m lab.view_data photos /tmp/view-photos 1000 4000 3000
echo "photos made at $(( $(date +%s) - t0 )) s"
for run in cold warm; do
  timeout $(left 200) /usr/bin/time -v python3 -m engine view /tmp/view-photos --headless \
    --frames 30 --budget 256MiB --no-detail --report "$OUT/view_photos_$run.json" > "$OUT/view_photos_$run.txt" 2>&1
  echo "photos $run rc $? at $(( $(date +%s) - t0 )) s"
done
timeout 40 python3 -m lab.view_data huge /tmp/view-huge.png 16384
timeout $(left 290) /usr/bin/time -v python3 -m engine view /tmp/view-huge.png --headless \
  --frames 60 --budget 128MiB --full-size 1 --wait-detail --max-pixels 300000000 \
  --report "$OUT/view_huge.json" --screenshot "$OUT/view_huge.png" > "$OUT/view_huge.txt" 2>&1
echo "huge rc $? at $(( $(date +%s) - t0 )) s"
grep -h -E "Maximum resident|Elapsed|thumbnails:|first frame" "$OUT"/view_*.txt
