"""Times the CE+TVD peers (torch eager, torch.compile, Liger-Kernel's fused
CE+TVD) at several shapes in one process, for scripts/gpu-cetvd-shapes.sh.

The measurements themselves come from a peers harness that is not part of
this repository (a peers.py with `ceilings`, `cetvd` and `emit`, named by
--harness; scripts/gpu-cetvd-shapes.sh passes $PEERS_HARNESS): its
`ceilings` (copy bandwidth) once, then its `cetvd` per shape. torch.compile
starts afresh at each shape (dynamo reset), so every shape gets its own
static-shape kernels, as a user compiling for one shape would.

  python3 scripts/bench/cetvd_peers.py --harness .carry/peers.py \
      [--providers torch_compile,liger] BT:V:dtype [BT:V:dtype ...]

Prints the harness's JSON lines (one per provider and shape).
"""
import argparse
import importlib.util
import os
import sys


def load_harness(path):
    spec = importlib.util.spec_from_file_location("peers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness", required=True,
                    help="path of the peers harness (peers.py)")
    ap.add_argument("--providers", default="torch_compile,liger")
    ap.add_argument("shapes", nargs="+", help="BT:V:dtype")
    a = ap.parse_args()
    if not os.path.isfile(a.harness):
        ap.error(f"no peers harness at {a.harness}")
    peers = load_harness(a.harness)
    import torch

    ceil = peers.ceilings()
    for shape in a.shapes:
        bt, v, dtype = shape.split(":")
        args = argparse.Namespace(bt=int(bt), vocab=int(v), dtype=dtype,
                                  providers=a.providers)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        try:
            peers.cetvd(args, ceil)
        except Exception as e:  # e.g. out of memory: report, go on
            peers.emit({"kind": "cetvd", "BT": args.bt, "V": args.vocab,
                        "dtype": dtype, "error": repr(e)[:300]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
