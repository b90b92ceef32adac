# Sourced ON the GPU machine by the gpu-*.sh scripts, from the repo root:
# unpacks the carried binaries into ./gpu-bin, makes $out (OUT, default
# ./out) and points the Python package at the carried libtilejit.so (and
# at Liger-Kernel's source when .peers/liger was carried). Set `parts`
# before sourcing; `has NAME` says whether NAME is among them.
out=${OUT:-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache
export TILEJIT_LIBRARY=$PWD/gpu-bin/libtilejit.so.0
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
[ -d .peers/liger ] && export PYTHONPATH=$PYTHONPATH:$PWD/.peers/liger
has() { [[ " $parts " == *" $1 "* ]]; }
