#!/usr/bin/env bash
# Run ON the GPU machine, from the repo root: unpack the binaries made by
# scripts/package-gpu.sh into ./gpu-bin/ and check that every shared library
# they need is there (see docs/static-build.md).
#
#   bash scripts/gpu-unpack.sh [archive]     # default .carry/tilejit-bin.tar.xz
set -euo pipefail

ARCHIVE=${1:-.carry/tilejit-bin.tar.xz}
DEST=gpu-bin
if [ ! -f "$ARCHIVE" ]; then
  echo "gpu-unpack: $ARCHIVE not found (run scripts/package-gpu.sh and carry .carry/)" >&2
  exit 1
fi
rm -rf "$DEST"
mkdir -p "$DEST"
xz -dc "$ARCHIVE" | tar -C "$DEST" -xf -
[ -f "$DEST/BUILD-INFO" ] && sed 's/^/gpu-unpack: /' "$DEST/BUILD-INFO"
echo "gpu-unpack: glibc here: $(ldd --version | head -1 | awk '{print $NF}')"

# libnvrtc.so.13 is found through the RUNPATH of the build machine's CUDA
# (/usr/local/cuda/...); if this machine keeps CUDA elsewhere, point
# LD_LIBRARY_PATH at it. The C ABI tests find libtilejit.so beside them
# (LD_LIBRARY_PATH=gpu-bin).
export LD_LIBRARY_PATH="$DEST${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
for exe in "$DEST"/*; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue
  missing=$(ldd "$exe" 2>&1 | grep -E 'not found|not a dynamic|version .* not found' || true)
  if [ -n "$missing" ]; then
    echo "gpu-unpack: $exe: MISSING:" >&2
    echo "$missing" >&2
    status=1
  else
    libs=$(ldd "$exe" | awk '/=>/ {print $1}' | tr '\n' ' ')
    echo "gpu-unpack: $exe ok ($(stat -c %s "$exe") bytes; needs: $libs)"
  fi
done
[ $status -eq 0 ] || {
  echo "gpu-unpack: missing libraries (for libnvrtc: export LD_LIBRARY_PATH=\$CUDA_HOME/lib64)" >&2
  exit 1
}
echo "gpu-unpack: test data in $DEST/tests/data"
