#!/usr/bin/env bash
# Virtual texturing on the H200, one stage per device call (each under 6 minutes, every
# command time-boxed). Run on the device machine from the checkout's copy, with `.gl`, `.whl`
# (../shared/tools/device-prep.sh tqdm nvidia-ml-py moderngl-window pyglet) and `.devsrc.tar`
# (`git archive -o .devsrc.tar HEAD`) carried:  bash benchmarks/device_vt.sh STAGE
# Stages (the gallery and the tiled copies live in /tmp/engine-cache while the machine stays
# warm; a cold machine makes them again inside the stage's time box). Tile-contiguous copies
# are the default storage now (made in the background into $ENGINE_CACHE/vt_tiles; the
# bench waits for them before its flight), reads batch a tile's queued row neighbours, keys
# are 64-bit (RG32UI feedback):
#   today   the issue's profile (200 x 4096^2 BC7 through 40 MiB at 3840x2160, 12 stops of 40
#           frames, 256 uploads, 12 readers, feedback at 1/8) on the default storage, then the
#           same flight reading the files as they are (--no-tiled): the stop-5 comparison
#   wide    the same with stops up to 8 panel widths away (up to the whole 200-panel wall)
#   budget  today's profile with the per-frame upload budget in ms (--upload-ms 2, at most
#           1024 tiles) instead of a fixed 256 tiles
#   reads   lab.vt_reads: mapped gather vs strided pread vs tiled copy, cold/warm,
#           and the cut table (TileIO: tiled a read a tile vs batched row runs)
#   cpu     lab.vt_cpu at today's profile: feedback + plan + page table per frame,
#           before/after, wall and thread time, p50/p95/p99
#   scale   lab.vt_scale: 1,000,000 registered textures against 10,000, same flight
#   reduce  today's profile (tiled) twice: the feedback reduced on the GPU (compute, the
#           default on a GPU) and on the CPU (what drivers without compute do); each run's
#           CPU for feedback + page table p50/p95/p99 and the mean phases of its slowest 1%
#           of frames (cpu_worst_frames: poll, reduce, expand, plan, I/O requests, resize,
#           page table). Under 5 minutes on a warm or cold machine.
# Every file the flight reads is dropped from the OS page cache first with posix_fadvise
# DONTNEED (per file; /proc/sys/vm/drop_caches is not needed). Each stage writes two files:
# $OUT/vt_STAGE.json (every run of the stage, by name) and $OUT/vt_STAGE_summary.txt (the
# GPU line, each run's rc and time, and one line of the issue's figures per run).
set -uo pipefail
stage=${1:?stage}
source "$(dirname "$0")/device_env.sh"
SUM="$OUT/vt_${stage}_summary.txt"; LOG=/tmp/vt_logs; mkdir -p "$LOG"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader > "$SUM" 2>&1
note() { echo "$*" | tee -a "$SUM"; }
PROFILE="--textures 200 --size 4096 --allowance 40MiB --output 3840x2160 --stops 12 --hold 40 --max-uploads 256 --io-workers 12 --feedback-scale 0.125"
gallery() {
  timeout $(left 150) python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)" > "$LOG/gallery.txt" 2>&1
  note "gallery rc $? at $(( $(date +%s) - t0 )) s"
}
run() {  # run NAME LIMIT_S MODULE ARGS...: one time-boxed bench writing $LOG/NAME.json
  local name=$1 limit=$2 mod=$3; shift 3
  timeout $(left "$limit") python3 -m "$mod" "$@" --json "$LOG/$name.json" > "$LOG/$name.txt" 2>&1
  note "$name rc $? at $(( $(date +%s) - t0 )) s"
}
finish() {  # fold the stage's runs into one JSON and one summary line each
  python3 - "$OUT/vt_$stage.json" "$LOG" "$@" <<'PY' | tee -a "$SUM"
import json, sys
out, log, names = sys.argv[1], sys.argv[2], sys.argv[3:]
doc = {}
for name in names:
    try:
        doc[name] = json.load(open(f"{log}/{name}.json"))
    except Exception as exc:  # a time-boxed run that did not finish
        doc[name] = {"error": str(exc), "tail": open(f"{log}/{name}.txt").read()[-2000:]}
json.dump(doc, open(out, "w"), indent=1)
pick = {"virtual": ("tiled_reads", "panels_per_stop", "psnr_settled_min_db",
                    "cut_to_95pct_p50_ms", "cut_to_95pct_p95_ms", "cpu_feedback_table_ms_p50",
                    "cpu_feedback_table_ms_p99", "visible_tiles_over_screen_need_median",
                    "feedback_gpu_ms_p50", "frames_over_budget", "tiled_copies_made_s",
                    "feedback_reduced_on", "cpu_feedback_table_ms_p95", "cut_to_95pct_p95_frames",
                    "frame_ms_p50", "cpu_worst_frames"),
        "cpu": ("after_cpu_ms_p50", "after_cpu_ms_p99", "after_cpu_thread_ms_p50",
                "after_cpu_thread_ms_p99", "before_cpu_ms_p50", "requests_identical_frames")}
for name, d in doc.items():
    if "error" in d:
        print(name, "no result:", d["error"]); continue
    if name.startswith("vt_cpu"):
        r = d["rows"][0]; print(name, json.dumps({k: r.get(k) for k in pick["cpu"]}))
    elif name.startswith("vt_scale"):
        print(name, json.dumps([{k: r[k] for k in ("textures", "ms_p50", "ms_p95", "ms_p99")}
                                for r in d["rows"]]), "ratio", d.get("p50_ratio_most_over_fewest"))
    elif name.startswith("vt_reads"):
        for r in d.get("cuts", []):
            print(name, "cut", json.dumps(r))
    else:
        r = d["rows"][0]; print(name, json.dumps({k: r.get(k) for k in pick["virtual"]}))
PY
}
case "$stage" in
today)
  gallery
  run vt_today_tiled 250 lab.virtual $PROFILE
  run vt_today_files 345 lab.virtual $PROFILE --no-tiled
  finish vt_today_tiled vt_today_files ;;
wide)
  gallery
  run vt_wide_tiled 345 lab.virtual $PROFILE --max-distance 8
  finish vt_wide_tiled ;;
budget)
  gallery
  run vt_budget_tiled 345 lab.virtual ${PROFILE/--max-uploads 256/--max-uploads 1024} --upload-ms 2
  finish vt_budget_tiled ;;
reads)
  run vt_reads_h200 300 lab.vt_reads --files 48 --size 4096 --tiles 2000 --threads 2 12
  finish vt_reads_h200 ;;
cpu)
  gallery
  run vt_cpu_h200 300 lab.vt_cpu --textures 200 --size 4096 --allowance 40MiB --output 3840x2160 --stops 12 --hold 40 --max-uploads 256 --feedback-scale 0.125
  finish vt_cpu_h200 ;;
scale)
  run vt_scale_h200 330 lab.vt_scale --textures 1000000 --compare 10000 --frames 300
  finish vt_scale_h200 ;;
reduce)
  gallery
  run vt_reduce_gpu 200 lab.virtual $PROFILE --feedback-reduce gpu
  run vt_reduce_cpu 290 lab.virtual $PROFILE --feedback-reduce cpu
  finish vt_reduce_gpu vt_reduce_cpu ;;
*) echo "unknown stage $stage (today, wide, budget, reads, cpu, scale, reduce)"; exit 2 ;;
esac
