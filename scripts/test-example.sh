#!/usr/bin/env bash
# Installs the build in $1 into a fresh prefix, then configures, builds and
# runs the out-of-tree example (examples/custom-kernel) against it: what a
# user of the installed library does. Run by ctest (test example-custom-kernel).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "$1" && pwd)
PREFIX=$BUILD/example-install
rm -rf "$PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
# Against libtilejit.so, then against the static archive.
for static in OFF ON; do
  dir=$BUILD/example-static-$static
  rm -rf "$dir"
  cmake -S "$ROOT/examples/custom-kernel" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DTILEJIT_EXAMPLE_STATIC=$static >/dev/null
  cmake --build "$dir"
  "$dir/custom-kernel"
done
