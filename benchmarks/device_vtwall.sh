#!/usr/bin/env bash
# The 10,000-image wall on virtual textures beside whole levels (issue 22), on the H200, in one
# device call of under 6 minutes. Run on the device machine from the checkout's copy, with
# `.gl`, `.whl` (../shared/tools/device-prep.sh tqdm nvidia-ml-py moderngl-window pyglet) and
# `.devsrc.tar` (`git archive -o .devsrc.tar HEAD`) carried:  bash benchmarks/device_vtwall.sh
#
# What it runs (the wall's assets live in /tmp/engine-cache while the machine stays warm; a cold
# machine makes them inside this call's time box first):
#   assets   10,000 x 1024^2 BC7 (demos/wall_assets.py); their tile-contiguous copies are
#            made in the background while the first flights run
#   flights  python -m lab.wall at 1280x720 (the GPU profile): the all-resident
#            reference, the whole-level flight nothing binds (it sets both paths' pools), the
#            virtual flight nothing binds, then at 25% and 100% of the peak wanted the
#            whole-level (tiered) and the virtual flight on the same pool; cuts from disk
#            (files and tiled copies dropped with posix_fadvise DONTNEED), virtual path
#            first (VTWALL_CUTS=disk,ram adds the cuts from RAM, if the time box holds them).
#            The JSON is rewritten after every flight, so a run cut short by its time box
#            keeps what it measured. Earlier H200 runs of this wall took 17-31 s a
#            whole-level flight and 42-45 s the all-resident reference
#            (benchmarks/bench_wall_h200_25.txt, _pf1.txt); seven flights and two cut
#            flights come before the RAM cuts.
# Outputs: $OUT/vtwall.json (rows and notes, the goals met or not in the notes), vtwall.txt
# (the log's tail), vtwall_summary.txt (GPU line, each part's rc and time, the goal lines).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
SUM="$OUT/vtwall_summary.txt"; LOG=/tmp/vtwall_logs; mkdir -p "$LOG"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader > "$SUM" 2>&1
note() { echo "$*" | tee -a "$SUM"; }
COUNT=${VTWALL_COUNT:-10000}; SIZE=${VTWALL_SIZE:-1024}

timeout $(left ${ASSETS_AT:-150}) python3 -c "
import time
from engine.demos.wall_assets import wall_textures
a = wall_textures($COUNT, $SIZE, progress=False)
print('wall assets', len(a.paths), 'made', a.generated, 'in', round(a.seconds, 1), 's')
" > "$LOG/assets.txt" 2>&1
note "assets rc $? at $(( $(date +%s) - t0 )) s: $(tail -1 "$LOG/assets.txt")"

# The tile-contiguous copies (about as many bytes as the files) in the background, while the
# reference and whole-level flights run: the cut flights read them (the bench waits for any
# still missing before its cuts; copies are written to a temporary name and renamed, so two
# writers of one copy never mix).
(timeout $(left ${COPIES_AT:-300}) nice -n 10 python3 -c "
import time
from engine.demos.wall_assets import wall_textures
from lab.wall import wall_tiled_copies
from engine.gl.device import Device
d = Device.headless(); t = time.perf_counter()
n = len(wall_tiled_copies(d, wall_textures($COUNT, $SIZE, progress=False).paths))
print('tiled copies', n, 'in', round(time.perf_counter() - t, 1), 's'); d.shutdown()
" > "$LOG/copies.txt" 2>&1; echo "copies rc $? at $(( $(date +%s) - t0 )) s: $(tail -1 "$LOG/copies.txt")" >> "$SUM") &

timeout $(left ${FLIGHTS_AT:-345}) python3 -m lab.wall --parts flights \
  --count "$COUNT" --texture-size "$SIZE" --fractions 0.25,1.0 --policies tiered \
  --no-prefetch-flight --cut-sources "${VTWALL_CUTS:-disk}" --paths levels,virtual \
  --json "$OUT/vtwall.json" > "$LOG/vtwall.txt" 2>&1
note "flights rc $? at $(( $(date +%s) - t0 )) s"
wait
grep -h "wall flight\|tiled copies\|virtual texture cache" "$LOG/vtwall.txt" | tail -40 >> "$SUM"
python3 - "$OUT/vtwall.json" >> "$SUM" 2>&1 <<'EOF'
import json, sys
from lab.wall_vt import goal_notes
d = json.load(open(sys.argv[1]))
for line in goal_notes(d["rows"]):
    print(line)
for r in d["rows"]:
    if r["part"] in ("wall", "cut", "vt-memory", "pan"):
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
EOF
tail -c 8000 "$LOG/vtwall.txt" > "$OUT/vtwall.txt"
cat "$SUM"
