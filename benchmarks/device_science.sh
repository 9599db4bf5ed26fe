#!/usr/bin/env bash
# The science bench on a GPU host (issue 37): the engine's ScienceView on a generated 4-channel
# uint16 OME-Zarr (zarr v3, 256^2 chunks, pyramid), first frame, zoom-to-sharp p95 and pan
# frame times at 1920x1080, GPU bytes (ledger and NVML) and RSS, from the sources named
# (disk; http: the same over HTTP from localhost; tiff and tiff-http: the same image as an
# OME-TIFF, from disk and by HTTP byte ranges); at 16384^2 and below, then the same image
# opened five times as five layers (20 channels) panned. One device call, time-boxed under
# 9.5 minutes; the image is generated on one process a core (16384^2: about 10 s). The
# host's disk writes about 44 MB/s (25 of 65536^2's 45 GB in 570 s), so images over 16384^2
# are made in RAM (/dev/shm: 128 GB there; 65536^2 in 67 s on the H100 host). napari does
# not run there (Qt and its dependencies exceed what a call may carry; no X server: see
# device_viewers.sh): its row says unavailable, and the side-by-side figures are llvmpipe's
# (docs/benchmarks.md).
# Prepare here, then carry .gl, .whl and .devsrc.tar:
#   ../shared/tools/device-prep.sh tqdm nvidia-ml-py zarr==3.1.6 numcodecs donfig \
#     google-crc32c fsspec typing-extensions packaging crc32c tifffile aiohttp requests \
#     multidict yarl frozenlist aiosignal propcache attrs aiohappyeyeballs idna \
#     charset-normalizer urllib3 certifi msgspec
#   git archive -o .devsrc.tar HEAD
#   bash benchmarks/device_science.sh [EDGE [SOURCES [VIEWERS]]]
#     (16384 disk,http,tiff,tiff-http engine,napari; engine-bc4: the engine keeping BC4 tiles)
# Writes under $OUT: science-EDGE.json and science_layers-EDGE.json (rows and each child's
# raw figures), gpu.csv, disk.txt.
set -uo pipefail
edge=${1:-16384}
sources=${2:-disk,http,tiff,tiff-http}
viewers=${3:-engine,napari}
ENGINE_CACHE=$([ "$edge" -le 16384 ] && echo /tmp || echo /dev/shm)/science-cache
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu.csv" 2>&1
layers=$([ "$edge" -le 16384 ] && echo 1 || echo 0)
timeout $(left $([ "$layers" = 1 ] && echo 400 || echo 570)) python3 -m lab.science \
  --size "$edge" --screen 1920x1080 --zooms 12 --budget 512MiB --viewers "$viewers" \
  --sources "$sources" --timeout 90 --wait 20 --json "$OUT/science-$edge.json"
echo "science rc $? at $(( $(date +%s) - t0 )) s"
df -h /tmp > "$OUT/disk.txt"; du -sh "$ENGINE_CACHE"/bench-science/* >> "$OUT/disk.txt" 2>&1
[ "$layers" = 1 ] || exit 0
timeout $(left 570) python3 -m lab.science --size "$edge" --screen 1920x1080 \
  --zooms 6 --budget 512MiB --viewers engine --layers 5 --timeout 120 --wait 20 \
  --json "$OUT/science_layers-$edge.json"
echo "layers rc $? at $(( $(date +%s) - t0 )) s"
