#!/usr/bin/env bash
# Sparse pages vs the page cache for virtual-texture tiles on the H200 (one device call,
# under 3 minutes). Run on the device machine from the checkout's copy with `.gl`, `.whl`
# and `.devsrc.tar` carried:  bash benchmarks/device_sparse.sh
# Writes $OUT/vt_sparse.json (lab/vt_sparse_probe.py) and $OUT/vt_sparse.txt.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/vt_sparse.txt" 2>&1
timeout $(left 150) python3 -m lab.vt_sparse_probe "$OUT/vt_sparse.json" \
  --textures 64 --size 4096 --cuts 24 --panels 83 --pool-mib 40 >> "$OUT/vt_sparse.txt" 2>&1
echo "probe rc $? at $(( $(date +%s) - t0 )) s" >> "$OUT/vt_sparse.txt"
