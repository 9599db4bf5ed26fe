#!/usr/bin/env bash
# Virtual texturing on the H200, one stage per device call (each under 6 minutes, every
# command time-boxed). Run on the device machine from the checkout's copy, with `.gl`, `.whl`
# (../shared/tools/device-prep.sh tqdm nvidia-ml-py moderngl-window pyglet) and `.devsrc.tar`
# (`git archive -o .devsrc.tar HEAD`) carried:  bash benchmarks/device_vt.sh STAGE
# Stages (the gallery and the tiled copies live in /tmp/engine-cache while the machine stays
# warm; a cold machine makes them again inside the stage's time box):
#   today   the issue's profile (200 x 4096^2 BC7 through 40 MiB at 3840x2160, 12 stops of 40
#           frames, 256 uploads, 12 readers, feedback at 1/8) reading tiled copies, then the
#           same flight reading the files as they are (--no-tiled): the stop-5 comparison
#   wide    the same with stops up to 8 panel widths away (up to the whole 200-panel wall)
#   budget  today's profile with the per-frame upload budget in ms (--upload-ms 2, at most
#           1024 tiles) instead of a fixed 256 tiles
#   reads   engine.bench.vt_reads: mapped gather vs strided pread vs tiled copy, cold/warm
# Every file the flight reads is dropped from the OS page cache first with posix_fadvise
# DONTNEED (per file; /proc/sys/vm/drop_caches is not needed). Each JSON row reports settled
# PSNR per stop, cut-to-95% p50/p95 (and per stop), CPU p50/p95/p99 for feedback + table,
# visible tiles over the screen's need, feedback GPU ms p50/p95 and frames over budget.
set -uo pipefail
stage=${1:?stage}
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
rm -rf /tmp/src && mkdir -p /tmp/src && tar -xf .devsrc.tar -C /tmp/src && cd /tmp/src || exit 1
ln -sfn ../shaders engine/shaders; ln -sfn ../demos engine/demos; ln -sfn ../assets engine/assets
export PYTHONPATH=/tmp/src:/tmp/site ENGINE_CACHE=/tmp/engine-cache PYTHONUNBUFFERED=1
: "${OUT:=/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s)
left() { local l=$(( $1 - ($(date +%s) - t0) )); [ "$l" -gt 5 ] && echo "$l" || echo 5; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu_vt_$stage.csv" 2>&1
PROFILE="--textures 200 --size 4096 --allowance 40MiB --output 3840x2160 --stops 12 --hold 40 --max-uploads 256 --io-workers 12 --feedback-scale 0.125"
gallery() {
  timeout $(left 150) python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  echo "gallery rc $? at $(( $(date +%s) - t0 )) s"
}
summary() {  # one line per JSON: the figures the issue asks for
  python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    try:
        r = json.load(open(path))["rows"][0]
    except Exception as exc:  # a time-boxed run that did not finish
        print(path, "no result:", exc); continue
    keys = ("tiled_reads", "panels_per_stop", "psnr_settled_per_stop_db", "psnr_settled_min_db",
            "cut_to_95pct_p50_ms", "cut_to_95pct_p95_ms", "cpu_feedback_table_ms_p50",
            "cpu_feedback_table_ms_p99", "visible_tiles_over_screen_need_median",
            "feedback_gpu_ms_p50", "frames_over_budget", "tiled_copies_made_s")
    print(path, json.dumps({k: r.get(k) for k in keys}))
PY
}
case "$stage" in
today)
  gallery
  timeout $(left 250) python3 -m engine.bench.virtual $PROFILE --json "$OUT/vt_today_tiled.json" > "$OUT/vt_today_tiled.txt" 2>&1
  echo "tiled rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 345) python3 -m engine.bench.virtual $PROFILE --no-tiled --json "$OUT/vt_today_files.json" > "$OUT/vt_today_files.txt" 2>&1
  echo "files rc $? at $(( $(date +%s) - t0 )) s"
  summary "$OUT/vt_today_tiled.json" "$OUT/vt_today_files.json" ;;
wide)
  gallery
  timeout $(left 345) python3 -m engine.bench.virtual $PROFILE --max-distance 8 --json "$OUT/vt_wide_tiled.json" > "$OUT/vt_wide_tiled.txt" 2>&1
  echo "wide rc $? at $(( $(date +%s) - t0 )) s"
  summary "$OUT/vt_wide_tiled.json" ;;
budget)
  gallery
  timeout $(left 345) python3 -m engine.bench.virtual ${PROFILE/--max-uploads 256/--max-uploads 1024} --upload-ms 2 --json "$OUT/vt_budget_tiled.json" > "$OUT/vt_budget_tiled.txt" 2>&1
  echo "budget rc $? at $(( $(date +%s) - t0 )) s"
  summary "$OUT/vt_budget_tiled.json" ;;
reads)
  timeout $(left 300) python3 -m engine.bench.vt_reads --files 48 --size 4096 --tiles 2000 --threads 2 12 --json "$OUT/vt_reads_h200.json" > "$OUT/vt_reads_h200.txt" 2>&1
  echo "reads rc $? at $(( $(date +%s) - t0 )) s"; tail -40 "$OUT/vt_reads_h200.txt" ;;
*) echo "unknown stage $stage (today, wide, budget, reads)"; exit 2 ;;
esac
