#!/usr/bin/env bash
# The encode bench on the H200: BC1 and BC7 through the CPU process pool (etcpak) and the GPU
# compute encoder, side by side (lab/encode.py), at 4096 and 8192 square; the GPU
# encoder's tests on the NVIDIA driver; `engine bake` of eight 4096 x 4096 JPEGs with either
# encoder. About 3 minutes (at most 4), each part time-boxed. Run on
# the device machine from the checkout's copy, with `.gl`, `.whl` and `.devsrc.tar` carried
# as for device_round.sh:  bash benchmarks/device_encode.sh
# Outputs in $OUT: bench_encode_h200_4096.json/.txt, bench_encode_h200_8192.json/.txt,
# test_gpu_encode_h200.txt, bake_h200_{bc7,bc1}_{cpu,gpu}.txt.
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
timeout $(left 100) python3 -m lab.encode --size 4096 --repeats 3 \
  --json "$OUT/bench_encode_h200_4096.json" > "$OUT/bench_encode_h200_4096.txt" 2>&1
echo "encode 4096 rc $? at $(( $(date +%s) - t0 )) s"
# End to end: `engine bake` of eight 4096 x 4096 JPEGs (the bench's mosaic, flipped and
# turned) with the CPU pool and with --encoder gpu, BC7 and BC1
mkdir -p /tmp/encphotos
timeout $(left 110) python3 -c "
import numpy as np; from PIL import Image; from lab.encode import mosaic
m = mosaic(4096)[..., :3]
for k in range(8):
    im = np.rot90(m[:, ::-1] if k % 2 else m, k // 2)
    Image.fromarray(np.ascontiguousarray(im)).save(f'/tmp/encphotos/p{k}.jpg', quality=92)
" > "$OUT/bake_inputs.txt" 2>&1
for fmt in bc7 bc1; do
  for enc in cpu gpu; do
    rm -rf "/tmp/encbaked_${fmt}_$enc"
    timeout $(left 150) python3 -m engine bake /tmp/encphotos -o "/tmp/encbaked_${fmt}_$enc" \
      --format "$fmt" --encoder "$enc" --no-progress > "$OUT/bake_h200_${fmt}_$enc.txt" 2>&1
    echo "bake $fmt $enc rc $? at $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/bake_h200_${fmt}_$enc.txt")"
  done
done
timeout $(left 230) python3 -m lab.encode --size 8192 --repeats 3 \
  --json "$OUT/bench_encode_h200_8192.json" > "$OUT/bench_encode_h200_8192.txt" 2>&1
echo "encode 8192 rc $? at $(( $(date +%s) - t0 )) s"
tail -c 3000 "$OUT"/*.txt
