#!/usr/bin/env bash
# Installs tilejit's dependencies (Debian 12 + the CUDA toolkit in
# /usr/local/cuda) and builds it into build/. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build ccache g++ llvm-22-dev libmlir-22-dev mlir-22-tools
          libgtest-dev libspdlog-dev libxtensor-dev zlib1g-dev libzstd-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "setup: the CUDA toolkit (NVRTC, cuda.h) is required in /usr/local/cuda" >&2
  exit 1
fi

export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH=/usr/lib/llvm-22 -DCUDAToolkit_ROOT=/usr/local/cuda
cmake --build build
