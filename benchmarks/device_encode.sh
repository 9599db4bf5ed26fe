#!/usr/bin/env bash
# The encode bench on the H200: BC1 and BC7 through the CPU process pool (etcpak) and the GPU
# compute encoder, side by side (engine/bench/encode.py), at 4096 and 8192 square, plus the
# GPU encoder's tests on the NVIDIA driver. About 3 minutes, each part time-boxed. Run on
# the device machine from the checkout's copy, with `.gl`, `.whl` and `.devsrc.tar` carried
# as for device_round.sh:  bash benchmarks/device_encode.sh
# Outputs in $OUT: bench_encode_h200_4096.json/.txt, bench_encode_h200_8192.json/.txt,
# test_gpu_encode_h200.txt.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu_encode.csv" 2>&1
nproc > "$OUT/nproc.txt"
if python3 -c "import pytest, texture2ddecoder" 2>/dev/null; then
  timeout $(left 40) python3 -m pytest -p no:cacheprovider -o addopts="" -q tests/test_gpu_encode.py \
    > "$OUT/test_gpu_encode_h200.txt" 2>&1
  echo "tests rc $? at $(( $(date +%s) - t0 )) s"
else
  echo "pytest or texture2ddecoder missing: tests skipped" > "$OUT/test_gpu_encode_h200.txt"
fi
for size in 4096 8192; do
  limit=$([ "$size" = 4096 ] && echo 100 || echo 175)
  timeout $(left $limit) python3 -m engine.bench.encode --size "$size" --repeats 3 \
    --json "$OUT/bench_encode_h200_$size.json" > "$OUT/bench_encode_h200_$size.txt" 2>&1
  echo "encode $size rc $? at $(( $(date +%s) - t0 )) s"
done
tail -c 3000 "$OUT"/*.txt
