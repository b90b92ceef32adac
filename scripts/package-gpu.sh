#!/usr/bin/env bash
# Build tilejit's statically linked executables and pack them for a GPU machine
# that has no LLVM/MLIR (see docs/static-build.md).
#
#   scripts/package-gpu.sh            # -> .carry/tilejit-bin.tar.xz
#
# Configures and builds build-static/ (Release, TILEJIT_STATIC=ON,
# TILEJIT_BUILD_TESTS=ON), strips whichever of tilejit, tilejit-opt and
# tilejit-unit-tests exist, and packs them with tests/data. On the GPU machine,
# from the repo root: bash scripts/gpu-unpack.sh  (-> ./gpu-bin/).
#
# Environment: BUILD_DIR (default <repo>/build-static),
#              TILEJIT_PACKAGE_TARGETS (default "tilejit tilejit-opt tilejit-unit-tests"),
#              TILEJIT_SHARED (default ON: also libtilejit.so, with MLIR/LLVM
#              and libstdc++ inside, and the C ABI tests that link it alone).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-static}
ARCHIVE=$ROOT/.carry/tilejit-bin.tar.xz
SHARED=${TILEJIT_SHARED:-ON}
WANTED=${TILEJIT_PACKAGE_TARGETS:-tilejit tilejit-opt tilejit-unit-tests}
[ "$SHARED" = ON ] && WANTED="$WANTED tilejit-capi-tests"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_PREFIX_PATH=/usr/lib/llvm-22 \
  -DCMAKE_BUILD_TYPE=Release -DTILEJIT_STATIC=ON -DTILEJIT_BUILD_TESTS=ON \
  -DTILEJIT_SHARED=$SHARED >/dev/null

# Only the executables this checkout defines.
defined=$(ninja -C "$BUILD" -t targets all | sed -n 's/^\([^:/]*\): phony$/\1/p')
targets=()
for t in $WANTED; do
  if grep -qx -- "$t" <<<"$defined"; then targets+=("$t"); fi
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "package-gpu: none of [$WANTED] is defined in this checkout" >&2
  exit 1
fi
echo "package-gpu: building ${targets[*]}"
start=$(date +%s)
ninja -C "$BUILD" "${targets[@]}" $([ "$SHARED" = ON ] && echo tilejit_shared)
echo "package-gpu: build took $(( $(date +%s) - start )) s"

stage=$BUILD/gpu-package
rm -rf "$stage"
mkdir -p "$stage/tests"
printf '%-22s %12s %12s\n' executable built stripped
for t in "${targets[@]}"; do
  exe=$(find "$BUILD" -name "$t" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  if [ -z "$exe" ]; then
    echo "package-gpu: built $t but cannot find the file" >&2
    exit 1
  fi
  # A shippable binary must not need LLVM/MLIR or the C++ runtime.
  if ldd "$exe" | grep -E 'libMLIR|libLLVM|libstdc\+\+|libgcc_s|libfmt|libspdlog|not found'; then
    echo "package-gpu: $exe is not self-contained (is build-static really TILEJIT_STATIC=ON?)" >&2
    exit 1
  fi
  strip --strip-all -o "$stage/$t" "$exe"
  printf '%-22s %12s %12s\n' "$t" "$(stat -c %s "$exe")" "$(stat -c %s "$stage/$t")"
done
if [ "$SHARED" = ON ]; then
  so=$(find "$BUILD/ops" -name 'libtilejit.so.*.*' -type f | head -1)
  # Self-contained, and only tilejit's API exported. An MLIR template
  # instantiated for one of tilejit's types (its demangled name begins with
  # the tilejit return type, so exports.map's tilejit::* takes it) cannot
  # collide with another copy of LLVM in the process: it is let through.
  if ldd "$so" | grep -E 'libMLIR|libLLVM|libstdc\+\+|libfmt|libspdlog|not found' ||
     nm -D --defined-only "$so" | grep -iE ' (_ZN4llvm|_ZN4mlir|llvm|mlir)' |
       grep -vE ' _ZN4mlir[^ ]*IN7tilejit'; then
    echo "package-gpu: $so is not self-contained or exports LLVM/MLIR" >&2
    exit 1
  fi
  soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
  strip --strip-unneeded -o "$stage/$soname" "$so"
  ln -s "$soname" "$stage/libtilejit.so"
  printf '%-22s %12s %12s
' "$soname" "$(stat -c %s "$so")" "$(stat -c %s "$stage/$soname")"
fi
cp -r "$ROOT/tests/data" "$stage/tests/data"
{
  echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "needs: glibc >= $(objdump -T "$stage"/tilejit* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | cut -d_ -f2), libnvrtc.so.13 (CUDA 13), libcuda.so.1 (driver, dlopen'ed)"
} >"$stage/BUILD-INFO"

mkdir -p "$(dirname "$ARCHIVE")"
start=$(date +%s)
tar -C "$stage" -cf - . | xz -9 -T2 >"$ARCHIVE.tmp"
mv "$ARCHIVE.tmp" "$ARCHIVE"
echo "package-gpu: xz took $(( $(date +%s) - start )) s"
echo "package-gpu: $(du -b "$ARCHIVE" | cut -f1) bytes ($(du -h "$ARCHIVE" | cut -f1)) in ${ARCHIVE#$ROOT/}"
echo "package-gpu: carry it with carry=[\".carry\"]; on the GPU machine: bash scripts/gpu-unpack.sh"
