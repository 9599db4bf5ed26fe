#!/usr/bin/env bash
# Deep zoom into a 65536^2 image from disk on the H200 (issue 23: viewed under 128 MiB with
# cut p95 <= 150 ms from disk), one device call, time-boxed under 10 minutes. Carry .gl, .whl
# (../shared/tools/device-prep.sh pyvips pyvips-binary cffi pycparser tifffile) and
# .devsrc.tar (`git archive -o .devsrc.tar HEAD`), as for device_round.sh, then:
#   bash benchmarks/device_deepzoom.sh
# Writes under $OUT: deepzoom_bake.json (`engine bake` of the generated JPEG-tiled TIFF by
# strips with its tiled sidecar: wall time, peak RSS and PSS, lab/bake_rss.py),
# deepzoom_h200.json / .txt (python -m lab.deepzoom at 1920x1080, 32 cuts) and,
# when time is left, deepzoom_h200_4k.json / .txt (3840x2160).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
W=/tmp/deepzoom; rm -rf "$W"; mkdir -p "$W/baked_bc1"
timeout 150 python3 -m lab.bake_rss make "$W/huge.tif" 65536 --jpeg || exit 1
echo "made at $(( $(date +%s) - t0 )) s: $(du -h "$W/huge.tif" | cut -f1)"
timeout $(left 500) python3 -m lab.bake_rss bake "$W/huge.tif" "$W/baked_bc1" \
  --format bc1 --json "$OUT/deepzoom_bake.json" > /dev/null
echo "baked rc $? at $(( $(date +%s) - t0 )) s"; ls -la "$W/baked_bc1"
timeout $(left 560) python3 -m lab.deepzoom --work "$W" --source "$W/huge.tif" \
  --budget 128MiB --size 1920x1080 --cuts 32 --json "$OUT/deepzoom_h200.json" \
  > "$OUT/deepzoom_h200.txt" 2>&1
echo "flight rc $? at $(( $(date +%s) - t0 )) s"
if [ "$(left 575)" -gt 40 ]; then
  timeout $(left 585) python3 -m lab.deepzoom --work "$W" --source "$W/huge.tif" \
    --budget 128MiB --size 3840x2160 --cuts 32 --json "$OUT/deepzoom_h200_4k.json" \
    > "$OUT/deepzoom_h200_4k.txt" 2>&1
  echo "4k flight rc $? at $(( $(date +%s) - t0 )) s"
fi
grep -h -A30 '"source"' "$OUT"/deepzoom_h200*.txt | grep -E "cut_p|reached|over_budget|peak_bytes|leaked|frame_ms|virtual|goal"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('width','rc','wall_s','peak_main_rss_mib','peak_worker_rss_mib','peak_tree_pss_mib','peak_tree_rss_mib')})" "$OUT/deepzoom_bake.json"
