#!/usr/bin/env bash
# `engine bake` of huge images by strips on the H200 host (issue 23: a 65536^2 image baked
# with at most 1 GiB of RSS), one device call, time-boxed under 5 minutes (the GPU is not
# used: this is the host's 16 cores). Carry .gl, .whl (../shared/tools/device-prep.sh pyvips
# pyvips-binary cffi pycparser: the strip reader's wheels) and .devsrc.tar (`git archive -o
# .devsrc.tar HEAD`), as for device_round.sh, then:
#   bash benchmarks/device_bake.sh
# Writes under $OUT: bake_16k_bc1.json, bake_16k_bc7.json (a 16384^2 tiled TIFF, all cores),
# bake_huge_bc1.json (65536^2 JPEG-tiled TIFF when the 16k rate says it fits the time left,
# else 32768^2), each with wall time, Mpx/s and peak RSS/PSS of the main process, the
# largest worker and the tree (lab/bake_rss.py), and bake_summary.txt.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
W=/tmp/bake-work; rm -rf "$W"; mkdir -p "$W"
nproc > "$OUT/bake_summary.txt"; free -g >> "$OUT/bake_summary.txt"
timeout 40 python3 -m lab.bake_rss make "$W/g16k.tif" 16384 || exit 1
echo "16k made at $(( $(date +%s) - t0 )) s"
for fmt in bc1 bc7; do
  timeout $(left 120) python3 -m lab.bake_rss bake "$W/g16k.tif" "$W/o16k_$fmt" \
    --format $fmt --json "$OUT/bake_16k_$fmt.json" > /dev/null
  echo "16k $fmt rc $? at $(( $(date +%s) - t0 )) s"
  rm -rf "$W/o16k_$fmt"
done
# 65536^2 is 16x the 16k image: take it when 16x the 16k BC1 wall time (plus making it) fits.
edge=$(python3 - "$OUT/bake_16k_bc1.json" "$(left 285)" <<'PY'
import json, sys
try:
    wall = json.load(open(sys.argv[1]))["wall_s"]
except (OSError, ValueError, KeyError):
    wall = 1e9
left = float(sys.argv[2])
print(65536 if 16 * wall * 1.4 < left else 32768)
PY
)
echo "huge edge $edge (time left $(left 285) s)"
timeout $(left 150) python3 -m lab.bake_rss make "$W/huge.tif" "$edge" --jpeg || exit 1
echo "huge made at $(( $(date +%s) - t0 )) s: $(du -h "$W/huge.tif" | cut -f1)"
timeout $(left 290) python3 -m lab.bake_rss bake "$W/huge.tif" "$W/ohuge" \
  --format bc1 --json "$OUT/bake_huge_bc1.json" > /dev/null
echo "huge rc $? at $(( $(date +%s) - t0 )) s"
ls -la "$W/ohuge" 2>/dev/null
rm -rf "$W"
for f in "$OUT"/bake_*.json; do
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], {k: d[k] for k in ('width','format','jobs','rc','wall_s','mpx_per_s_wall','peak_main_rss_mib','peak_worker_rss_mib','peak_tree_rss_mib','peak_tree_pss_mib')})" "$f"
done | tee -a "$OUT/bake_summary.txt"
