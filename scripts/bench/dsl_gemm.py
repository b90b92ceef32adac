"""The DSL GEMM beside cuBLAS, in one process, one JSON line per result.

lce_gemm is a GEMM written in the DSL as a user writes one (a K loop of
`dot` over `loadBlock`; kernels_spec/LinearCeGemm.cpp) that the compiler
turns into one pipelined tensor-core loop (tile-pipeline-dot). Each shape is
timed through torch.matmul (cuBLAS) and through lce_gemm in each config
given, with triton's do_bench (median); TFLOP/s count 2 M N K. Each result
is checked against an f32 product of the same bf16 inputs (relative
Frobenius error; bf16 output rounding alone gives about 2e-3).

    TILEJIT_LIBRARY=.../libtilejit.so PYTHONPATH=python \\
        python3 scripts/bench/dsl_gemm.py [--configs "BLOCK_M=128,... ..."]
"""
import argparse
import json

import torch
from triton.testing import do_bench

import tilejit

# name, M, N, K, op(A) = A^T, op(B) = B^T: the linear CE's chunk products at
# a 2048-row chunk of N = 8192, d = 4096, V = 128256, and a square one.
SHAPES = [
    ("square", 8192, 8192, 8192, 0, 0),
    ("logits h W^T", 2048, 128256, 4096, 0, 1),
    ("dh = dz W", 2048, 4096, 128256, 0, 0),
    ("dW = dz^T h", 128256, 4096, 2048, 1, 0),
]


def emit(**row):
    print(json.dumps(row), flush=True)


def operands(m, n, k, ta, tb):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((k, m) if ta else (m, k), device="cuda", generator=g)
    b = torch.randn((n, k) if tb else (k, n), device="cuda", generator=g)
    return a.bfloat16(), b.bfloat16()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", default="default",
                   help="space-separated configs of comma-separated NAME=VALUE "
                   "(\"default\": the spec's defaults)")
    p.add_argument("--shapes", default="all")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    configs = [{} if c == "default" else dict(kv.split("=") for kv in c.split(","))
               for c in args.configs.split()]
    for name, m, n, k, ta, tb in SHAPES:
        if args.shapes != "all" and name.split()[0] not in args.shapes.split(","):
            continue
        a, b = operands(m, n, k, ta, tb)
        opa = a.t() if ta else a
        opb = b.t() if tb else b
        ref = opa.float() @ opb.float()
        flop = 2.0 * m * n * k
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        cublas_ms = do_bench(lambda: torch.matmul(opa, opb, out=c), return_mode="median")
        err = ((c.float() - ref).norm() / ref.norm()).item()
        emit(shape=name, M=m, N=n, K=k, impl="cuBLAS (torch.matmul)", ms=round(cublas_ms, 4),
             tflops=round(flop / cublas_ms / 1e9, 1), rel_err=f"{err:.2e}")
        for cfg in configs:
            params = {key: int(v) for key, v in cfg.items()}
            try:
                kern = tilejit.kernel("lce_gemm", torch.bfloat16, TRANS_A=ta, TRANS_B=tb,
                                      C_F32=0, **params)
                bm, bn = kern.meta["BLOCK_M"], kern.meta["BLOCK_N"]
                grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
                c.fill_(float("nan"))

                def run():
                    kern[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), 1.0, 0.0)

                run()
                torch.cuda.synchronize()
                err = ((c.float() - ref).norm() / ref.norm()).item()
                ms = do_bench(run, return_mode="median")
                emit(shape=name, M=m, N=n, K=k, impl="lce_gemm", config=kern.config,
                     ms=round(ms, 4), tflops=round(flop / ms / 1e9, 1),
                     of_cublas=round(cublas_ms / ms, 3), rel_err=f"{err:.2e}",
                     check="PASS" if err < 1e-2 else "FAIL")
            except Exception as e:
                emit(shape=name, impl="lce_gemm", config=str(cfg),
                     error=f"{type(e).__name__}: {e}"[:400])
        del a, b, ref, c
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
