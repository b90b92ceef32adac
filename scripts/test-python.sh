#!/usr/bin/env bash
# The Python package's tests (python/tests) on the CPU, in the venv
# build/venv, against the libtilejit.so of build/ (scripts/setup.sh).
#
# PyTorch for CI: PyPI's torch wheels for Linux x86_64 are CUDA builds and
# PyPI has no CPU-only one. torch 2.11.0 (cu130) is a 531 MB wheel; its full
# dependencies (cuDNN, cuBLAS, NCCL, ... and triton) add about 2.3 GB. This
# machine's CUDA 13 toolkit (/usr/local/cuda, on the loader's path) already
# has cudart, cuBLAS, cuFFT, cuSPARSE, NVRTC, cuDNN and NCCL, so only the
# three libraries libtorch_cuda.so links that the toolkit lacks come from
# PyPI (nvidia-cufile 1.4 MB, nvidia-cusparselt-cu13 170 MB,
# nvidia-nvshmem-cu13 135 MB): about 840 MB downloaded, ~1 minute to
# install into a fresh venv from pip's cache, seconds once the venv exists.
# Where that torch does not import (no CUDA 13 toolkit), the full
# dependencies are installed instead.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH=2.11.0
venv=build/venv
py=$venv/bin/python
lib=${TILEJIT_LIBRARY:-$PWD/build/ops/libtilejit.so}

[ -x "$py" ] || python3 -m venv "$venv"
if ! "$py" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH')" 2>/dev/null; then
  "$py" -m pip install -q --upgrade pip
  "$py" -m pip install -q --no-deps "torch==$TORCH" nvidia-cufile==1.17.1.22 \
    nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5
  "$py" -m pip install -q filelock "typing-extensions>=4.10" "sympy>=1.13.3" \
    networkx jinja2 fsspec "setuptools<82"
  if ! "$py" -c "import torch" 2>/dev/null; then
    echo "test-python: torch without its CUDA wheels does not import here;" \
         "installing them" >&2
    "$py" -m pip install -q "torch==$TORCH"
  fi
fi
"$py" -m pip install -q pytest numpy "scikit-build-core>=0.10"
# The package without the CMake build (build/ has libtilejit.so already).
TILEJIT_PYTHON_NO_CMAKE=1 "$py" -m pip install -q --no-deps \
  --no-build-isolation --force-reinstall .
TILEJIT_LIBRARY=$lib "$py" -m pytest -q -p no:cacheprovider python/tests
