#!/usr/bin/env bash
# The science bench on the H200 (issue 37): the engine's ScienceView on a generated 4-channel
# uint16 OME-Zarr (zarr v3, 256^2 chunks, pyramid), first frame, zoom-to-sharp p95 and pan
# frame times at 1920x1080, GPU bytes (ledger and NVML) and RSS, from disk and again over
# HTTP from localhost; then the same image opened five times as five layers (20 channels of
# 16384^2) panned; one device call, time-boxed under 9 minutes (the image about 60-90 s
# at 16384^2, each run at most 90 s). napari does not run
# there (Qt and its dependencies exceed what a call may carry; no X server: see
# device_viewers.sh): its row says unavailable, and the side-by-side figures are llvmpipe's
# (docs/benchmarks.md). 65536^2 (the issue's goal size) takes longer to generate than a call.
# Prepare here, then carry .gl, .whl and .devsrc.tar:
#   ../shared/tools/device-prep.sh tqdm nvidia-ml-py zarr==3.1.6 numcodecs donfig \
#     google-crc32c fsspec typing-extensions packaging crc32c tifffile aiohttp requests \
#     multidict yarl frozenlist aiosignal propcache attrs aiohappyeyeballs idna \
#     charset-normalizer urllib3 certifi
#   git archive -o .devsrc.tar HEAD
#   bash benchmarks/device_science.sh [EDGE]
# Writes under $OUT: science.json and science_layers.json (rows and each child's raw
# figures), gpu.csv.
set -uo pipefail
ENGINE_CACHE=/tmp/science-cache
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu.csv" 2>&1
timeout $(left 285) python3 -m lab.science --size "${1:-16384}" --screen 1920x1080 \
  --zooms 12 --budget 512MiB --viewers engine,napari --sources disk,http --timeout 90 --wait 20 \
  --json "$OUT/science.json"
echo "science rc $? at $(( $(date +%s) - t0 )) s"
timeout $(left 540) python3 -m lab.science --size "${1:-16384}" --screen 1920x1080 \
  --zooms 6 --budget 512MiB --viewers engine --layers 5 --timeout 120 --wait 20 \
  --json "$OUT/science_layers.json"
echo "layers rc $? at $(( $(date +%s) - t0 )) s"
