# Sourced first by every benchmarks/device_*.sh stage, run from the checkout's copy on the
# device machine: the GL loaders (.gl), the wheels (.whl), the committed tree (.devsrc.tar)
# unpacked in /tmp/src, which is the current directory afterwards; $OUT; and `left N`, the
# seconds left of an N-second stage (at least 5). Set ENGINE_CACHE before sourcing to use
# another cache folder than /tmp/engine-cache.
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
rm -rf /tmp/src && mkdir -p /tmp/src && tar -xf .devsrc.tar -C /tmp/src && cd /tmp/src || exit 1
# Under PYTHONPATH the wheel's package_dir mapping is not applied: link what it would install.
ln -sfn ../shaders engine/shaders; ln -sfn ../demos engine/demos; ln -sfn ../assets engine/assets
export PYTHONPATH=/tmp/src:/tmp/site ENGINE_CACHE="${ENGINE_CACHE:-/tmp/engine-cache}" PYTHONUNBUFFERED=1
: "${OUT:=/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s)
left() { local l=$(( $1 - ($(date +%s) - t0) )); [ "$l" -gt 5 ] && echo "$l" || echo 5; }
