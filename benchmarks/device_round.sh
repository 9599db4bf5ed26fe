#!/usr/bin/env bash
# The H200 runs behind docs/benchmarks.md's GPU figures, one stage per device call (each call is limited
# to 10 minutes, so the stages are sized to fit). Run on the device machine from the checkout's
# copy, with `.gl`, `.whl` (../shared/tools/device-prep.sh tqdm nvidia-ml-py moderngl-window pyglet) and `.devsrc.tar`
# (`git archive -o .devsrc.tar HEAD`: the committed tree, not a working tree other people are
# editing) carried:  bash benchmarks/device_round.sh STAGE
# Outputs go to $OUT. The asset cache lives in /tmp/engine-cache, which survives between calls
# only while the machine stays warm.
set -uo pipefail
stage=${1:?stage}
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu_$stage.csv" 2>&1

case "$stage" in
one)  # info (NVX next to NVML), the wall's assets in the background, the 100,000-frame soak
  python3 -m engine info --headless --json > "$OUT/info_h200.json" 2> "$OUT/info_h200.err"
  python3 -m engine info --headless > "$OUT/info_h200.txt" 2>&1
  (nice -n 10 python3 -c "
import logging, time; logging.basicConfig(level=logging.INFO)
from engine.demos.wall_assets import wall_textures
from lab.scaling import scaling_textures
a = wall_textures(10_000, 1024, progress=False); t = time.perf_counter(); scaling_textures(10_000)
print('wall assets', a.generated, 'made in', round(a.seconds, 1), 's; scaling', round(time.perf_counter() - t, 1), 's')
" > "$OUT/assets.log" 2>&1; echo "assets rc $? at $(( $(date +%s) - t0 )) s" >> "$OUT/assets.log") &
  gen=$!
  /usr/bin/time -v python3 -m lab soak --frames 1000 --json "$OUT/soak_h200_1k.json" > "$OUT/soak_h200_1k.txt" 2>&1
  echo "1k soak done at $(( $(date +%s) - t0 )) s"
  timeout $(left 560) /usr/bin/time -v python3 -m lab soak --frames 100000 --json "$OUT/soak_h200.json" > "$OUT/soak_h200.txt" 2>&1
  echo "100k soak rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 585) bash -c "while kill -0 $gen 2>/dev/null; do sleep 2; done"
  cat "$OUT/assets.log"; du -sh /tmp/engine-cache/* ;;
earlier)  # the frame bench first (shader edits since the last H200 run compile there), then
  # the previous round's tables on the current code, one suite per JSON, each time-boxed
  python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  echo "gallery at $(( $(date +%s) - t0 )) s"
  timeout $(left 200) python3 -m lab.frame --json "$OUT/frame_h200.json" > "$OUT/frame_h200.txt" 2>&1
  echo "frame rc $? at $(( $(date +%s) - t0 )) s"
  for s in accounting upload resolution startup scaling bake peers; do
    timeout $(left 590) python3 -m lab bench "$s" --json "$OUT/bench_h200_$s.json" > "$OUT/bench_h200_$s.txt" 2>&1
    echo "$s rc $? at $(( $(date +%s) - t0 )) s"
  done ;;
rest)  # after wall10k on the warm machine: the 100% and 50% flights with prefetch on/off,
  # then the startup suite (its full-quality check fixed for page-cached textures)
  python3 -c "from engine.demos.wall_assets import wall_textures; print('made', wall_textures(10_000, 1024, progress=False).generated)"
  timeout $(left 330) python3 -m lab.wall --parts flights --fractions 1.0,0.5 \
    --cut-sources "" --json "$OUT/bench_wall_h200_rest.json" > "$OUT/bench_wall_h200_rest.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s"; grep "wall flight" "$OUT/bench_wall_h200_rest.txt"
  python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  timeout $(left 590) python3 -m lab bench startup --json "$OUT/bench_h200_startup.json" > "$OUT/bench_h200_startup.txt" 2>&1
  echo "startup rc $? at $(( $(date +%s) - t0 )) s"; grep -v WARNING "$OUT/bench_h200_startup.txt" | tail -12 ;;
policy)  # the 25% and 10% flights again after the planner fix (all three policies)
  python3 -c "from engine.demos.wall_assets import wall_textures; print('made', wall_textures(10_000, 1024, progress=False).generated)"
  echo "assets at $(( $(date +%s) - t0 )) s"
  timeout $(left 420) python3 -m lab.wall --parts flights --fractions 0.25,0.1 \
    --cut-sources "" --no-prefetch-flight --json "$OUT/bench_wall_h200_policy.json" > "$OUT/bench_wall_h200_policy.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s"; grep "wall flight" "$OUT/bench_wall_h200_policy.txt" ;;
wall)  # the 10,000-image wall (assets made by stage one while the machine stayed warm)
  python3 -c "from engine.demos.wall_assets import wall_textures; from lab.scaling import scaling_textures; print('made', wall_textures(10_000, 1024, progress=False).generated); scaling_textures(10_000)"
  timeout $(left 585) python3 -m lab bench wall --json "$OUT/bench_wall_h200.json" > "$OUT/bench_wall_h200.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s" ;;
wall10k)  # the wall in one call from a cold machine: assets, scale figures, then the flights
  # that matter most (25% and 10% budgets, all three policies; cuts from RAM and disk), the
  # JSON rewritten after each flight
  python3 -c "from engine.demos.wall_assets import wall_textures; from lab.scaling import scaling_textures; print('made', wall_textures(10_000, 1024, progress=False).generated); scaling_textures(10_000)"
  echo "assets at $(( $(date +%s) - t0 )) s"
  timeout $(left ${WALL_LIMIT:-585}) python3 -m lab.wall --parts scale,flights --fractions 0.25,0.1 \
    --cut-sources ram,disk --no-prefetch-flight --json "$OUT/bench_wall_h200.json" > "$OUT/bench_wall_h200.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s"; grep "wall flight" "$OUT/bench_wall_h200.txt" ;;
gpu)  # frame, pacing on the batched path, virtual texturing at 4K
  python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  echo "gallery at $(( $(date +%s) - t0 )) s"
  timeout $(left 200) python3 -m lab.frame --json "$OUT/frame_h200.json" > "$OUT/frame_h200.txt" 2>&1
  echo "frame rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 240) python3 -m lab.frame --profile-streamer 10000 > "$OUT/frame_stream_profile_h200.txt" 2>&1
  echo "profile rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 360) python3 -m lab.gpu_pacing "$OUT/pacing_h200.json" > "$OUT/pacing_h200.txt" 2>&1
  echo "pacing rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 585) python3 -m lab.virtual --textures 200 --size 4096 --allowance 40MiB \
    --output 3840x2160 --stops 12 --hold 40 --max-uploads 256 --io-workers 12 --feedback-scale 0.125 \
    --json "$OUT/bench_virtual_h200.json" > "$OUT/bench_virtual_h200.txt" 2>&1
  echo "virtual rc $? at $(( $(date +%s) - t0 )) s" ;;
final)  # what one last call can hold, each part time-boxed, the most wanted first
  (python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)" > "$OUT/gallery_assets.log" 2>&1) &
  g=$!
  python3 -c "from engine.demos.wall_assets import wall_textures; from lab.scaling import scaling_textures; print('made', wall_textures(10_000, 1024, progress=False).generated); scaling_textures(10_000)"
  wait $g; echo "assets at $(( $(date +%s) - t0 )) s"
  timeout $(left ${FRAME_AT:-170}) python3 -m lab.frame --json "$OUT/frame_h200.json" > "$OUT/frame_h200.txt" 2>&1
  echo "frame rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left ${PACING_AT:-270}) python3 -m lab.gpu_pacing "$OUT/pacing_h200.json" > "$OUT/pacing_h200.txt" 2>&1
  echo "pacing rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left ${VIRTUAL_AT:-400}) python3 -m lab.virtual --textures 200 --size 4096 --allowance 40MiB \
    --output 3840x2160 --stops 12 --hold 40 --max-uploads 256 --io-workers 12 --feedback-scale 0.125 \
    --json "$OUT/bench_virtual_h200.json" > "$OUT/bench_virtual_h200.txt" 2>&1
  echo "virtual rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left ${WALL_LIMIT:-585}) python3 -m lab.wall --parts scale,flights --fractions 0.25,0.1 \
    --cut-sources ram,disk --no-prefetch-flight --json "$OUT/bench_wall_h200.json" > "$OUT/bench_wall_h200.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s"; grep "wall flight" "$OUT/bench_wall_h200.txt" ;;
peers)  # the previous round's peers table on the current code (moderngl-window and pyglet wheels
  # carried in .whl; Panda3D's 53 MB wheel does not fit the transfer limit next to the others)
  python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  echo "gallery at $(( $(date +%s) - t0 )) s"
  timeout $(left 590) python3 -m lab bench peers --json "$OUT/bench_h200_peers.json" > "$OUT/bench_h200_peers.txt" 2>&1
  echo "peers rc $? at $(( $(date +%s) - t0 )) s" ;;
pf1|pf2)  # the wall again after prefetch's neighbour ring was narrowed (3 -> 2): pf1 the 50%
  # and 25% flights with the prefetch on/off flight, pf2 the 100% and 10% flights and the cuts
  python3 -c "from engine.demos.wall_assets import wall_textures; print('made', wall_textures(10_000, 1024, progress=False).generated)"
  echo "assets at $(( $(date +%s) - t0 )) s"
  if [ "$stage" = pf1 ]; then args=(--fractions 0.5,0.25 --cut-sources ""); else
    args=(--fractions 1.0,0.1 --cut-sources ram,disk --no-prefetch-flight); fi
  timeout $(left 585) python3 -m lab.wall --parts flights "${args[@]}" \
    --json "$OUT/bench_wall_h200_$stage.json" > "$OUT/bench_wall_h200_$stage.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s"; grep "wall flight" "$OUT/bench_wall_h200_$stage.txt" ;;
frame)  # the frame bench alone (after device_vt.sh made the gallery in the same cache)
  python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  timeout $(left 200) python3 -m lab.frame --json "$OUT/frame_h200.json" > "$OUT/frame_h200.txt" 2>&1
  echo "frame rc $? at $(( $(date +%s) - t0 )) s" ;;
wallpace)  # the 25% wall flights of all three policies (the deterministic flights behind the
  # headline figures), then streamed-vs-resident pacing on the batched path
  python3 -c "from engine.demos.wall_assets import wall_textures; print('made', wall_textures(10_000, 1024, progress=False).generated)"
  echo "assets at $(( $(date +%s) - t0 )) s"
  timeout $(left 330) python3 -m lab.wall --parts flights --fractions 0.25 --cut-sources "" \
    --no-prefetch-flight --json "$OUT/bench_wall_h200_25.json" > "$OUT/bench_wall_h200_25.txt" 2>&1
  echo "wall rc $? at $(( $(date +%s) - t0 )) s"; grep "wall flight" "$OUT/bench_wall_h200_25.txt"
  python3 -c "from engine.demos.gallery_assets import gallery_textures; gallery_textures(200, 4096, 'bc7', progress=False)"
  timeout $(left 470) python3 -m lab.gpu_pacing "$OUT/pacing_h200.json" > "$OUT/pacing_h200.txt" 2>&1
  echo "pacing rc $? at $(( $(date +%s) - t0 )) s" ;;
drivers)  # the device profile, the per-object path against the batched one, transcode cost,
  # and the driver matrix's scenes on the full driver (the NVIDIA pictures beside llvmpipe's)
  python3 -m engine info --headless --json > "$OUT/info_h200.json" 2> "$OUT/info_h200.err"
  timeout $(left 300) python3 -m lab.frame --counts 200,1000,10000 --sizes 1280x720 \
    --json "$OUT/frame_paths_h200.json" > "$OUT/frame_paths_h200.txt" 2>&1
  echo "frame rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 360) python3 -m lab bench transcode --json "$OUT/transcode_h200.json" \
    > "$OUT/transcode_h200.txt" 2>&1
  echo "transcode rc $? at $(( $(date +%s) - t0 )) s"
  for s in gallery gallery-vt gltf; do
    timeout $(left 560) python3 tests/driver_child.py "$s" "$OUT/drivers" > "$OUT/drivers_$s.txt" 2>&1
    echo "$s rc $? at $(( $(date +%s) - t0 )) s"
  done ;;
elastic)  # the elastic staging ring against the fixed one's figures (upload, streaming),
  # and the README's main job (its budget measured from the scene) on the H200
  timeout $(left 300) python3 -m lab bench upload streaming --json "$OUT/upload_streaming_h200.json" \
    > "$OUT/upload_streaming_h200.txt" 2>&1
  echo "bench rc $? at $(( $(date +%s) - t0 )) s"
  timeout $(left 560) python3 -m engine demo gallery --frames 300 --headless \
    --report "$OUT/gallery_h200.json" > "$OUT/gallery_h200.txt" 2>&1
  echo "gallery rc $? at $(( $(date +%s) - t0 )) s" ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
tail -c 3000 "$OUT"/*.txt
