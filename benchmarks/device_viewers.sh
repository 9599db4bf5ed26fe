#!/usr/bin/env bash
# `python -m lab bench viewers` on the H200 (issue 23): the engine and fastplotlib on the
# same 1,000 generated 4000x3000 JPEGs and one 32768^2 tiled TIFF pyramid, one device call,
# time-boxed under 6 minutes (the data about 45 s, each viewer process at most 75 s).
# napari does not run there: Qt alone (PyQt5 + PyQt5-Qt5 wheels, 69 MB; PySide6-Essentials
# 80 MB) is more than the 64 MiB a call may carry, napari's own dependencies add 110 MB more
# (scipy 35 MB, scikit-image 14 MB, pandas 12 MB, ...), and the device has no X server for
# its Qt window. The bench reports it unavailable with the import error.
# Prepare here, then carry .gl (which holds libvulkan1, the Vulkan loader wgpu needs),
# .whl and .devsrc.tar:
#   ../shared/tools/device-prep.sh tqdm nvidia-ml-py pyvips pyvips-binary tifffile \
#     fastplotlib pygfx==0.17.0 wgpu rendercanvas pylinalg cmap freetype-py uharfbuzz \
#     jinja2 markupsafe hsluv cffi pycparser         (about 40 MB of wheels with the engine's)
#   git archive -o .devsrc.tar HEAD
#   bash benchmarks/device_viewers.sh
# Writes under $OUT: viewers.json (rows, notes and every child's raw figures; rewritten
# after each child), viewers.txt (the table), vulkan.txt (which Vulkan driver wgpu found).
set -uo pipefail
ENGINE_CACHE=/tmp/viewers-cache
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$OUT/gpu.csv" 2>&1
# wgpu draws through Vulkan: NVIDIA's driver implements it in libGLX_nvidia; where the image
# has the library but no ICD file for the loader, write one.
{
  icd=$(ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -1)
  if [ -z "$icd" ]; then
    lib=$(ldconfig -p | awk '/libGLX_nvidia.so.0/ {print $NF; exit}')
    if [ -n "$lib" ]; then
      icd=/tmp/nvidia_icd.json
      printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.3.0"}}\n' "$lib" > "$icd"
    fi
  fi
  echo "icd: ${icd:-none}"; [ -n "$icd" ] && cat "$icd" && export VK_ICD_FILENAMES="$icd"
  python3 -c "import wgpu; print(dict(wgpu.gpu.request_adapter_sync(power_preference='high-performance').info))" 2>&1 | tail -3
} > "$OUT/vulkan.txt" 2>&1
icd=$(awk '/^icd: / {print $2}' "$OUT/vulkan.txt"); [ "$icd" != none ] && export VK_ICD_FILENAMES="$icd"
export XDG_RUNTIME_DIR=/tmp
timeout $(left 340) python3 -m lab.viewers --photos 1000 --huge 32768x32768 \
  --json "$OUT/viewers.json" > "$OUT/viewers.txt" 2>&1
echo "viewers rc $? at $(( $(date +%s) - t0 )) s"
cat "$OUT/vulkan.txt"; grep -v "^INFO" "$OUT/viewers.txt" | tail -40
