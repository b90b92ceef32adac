"""tilejit's PyTorch ops on the GPU beside their peers, one JSON line per
measurement.

- host: the wall time of one call or one forward + backward step queued
  back to back on shapes whose kernels take microseconds (the host is the
  bottleneck there), beside the floor any Python op pays (an empty
  autograd.Function) and Liger-Kernel's ops; then the same step replayed
  from a CUDA graph.
- cetvd, lce: forward + backward at the main shapes (triton's do_bench:
  median, L2 flushed between calls, the method of the peers' numbers), the
  peak memory above the inputs, and, for tilejit, the step replayed from a
  CUDA graph; peers: PyTorch eager and torch.compile of the same math,
  Liger-Kernel's fused linear CE when its source is on PYTHONPATH. `tilejit
  bench` of the same ops, run in the same job, gives the kernels' time.

    TILEJIT_LIBRARY=.../libtilejit.so PYTHONPATH=python:.peers/liger \\
        python3 scripts/bench/torch_ops.py [host cetvd lce]
"""
import cProfile
import ctypes
import io
import json
import pstats
import sys
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from tilejit import _capi
from tilejit.torch import ce_tvd as ce_tvd_module
from tilejit.torch import fused_ce_tvd, linear_cross_entropy

try:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.fused_linear_cross_entropy import \
        LigerFusedLinearCrossEntropyFunction
except ImportError as e:
    print(json.dumps({"liger": f"skipped: {e}"}), flush=True)
    LigerCrossEntropyFunction = LigerFusedLinearCrossEntropyFunction = None

DEV = "cuda"


def emit(**row):
    print(json.dumps(row), flush=True)


def step(loss_fn, *leaves):
    """One forward + backward with fresh gradients, as after
    optimizer.zero_grad(set_to_none=True)."""
    def run():
        for leaf in leaves:
            leaf.grad = None
        loss_fn().backward()
    return run


def host_us(fn, calls=2000):
    """Wall time per call of `fn` queued back to back."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def graphed(fn):
    """fn captured in a CUDA graph after warm-up on a side stream (what
    torch.cuda.graphs asks): the graph's replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def peak_mib(fn):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


class Empty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.new_empty(())

    @staticmethod
    def backward(ctx, g):
        return None


def c_call_alone(s, t, y):
    """The C ABI's reduced CE+TVD (three kernel launches) on prebuilt
    arguments: the library's share of a call's host time."""
    grad = torch.empty_like(s)
    loss = torch.empty((), device=DEV)
    bad = torch.empty(1, dtype=torch.int32, device=DEV)
    a = ce_tvd_module._reduced_args(s, t, y, grad, loss, bad, 1.0, 1.0, -100,
                                    True)
    lib = _capi.lib()
    n = ctypes.c_size_t()
    _capi.check(lib.tilejit_ce_tvd_reduced_workspace_bytes(ctypes.byref(a),
                                                           ctypes.byref(n)))
    ws = torch.empty(n.value, dtype=torch.uint8, device=DEV)
    stream = torch.cuda.current_stream().cuda_stream
    return lambda: lib.tilejit_ce_tvd_reduced(
        ctypes.byref(a), ws.data_ptr(), n.value, _capi.DEVICE_GPU, stream)


def profile(what, fn, calls=2000):
    """cProfile of `calls` calls: where the Python time goes."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    print(f"# profile: {what}\n" + "\n".join(
        "# " + line for line in text.getvalue().splitlines()[4:]), flush=True)


def host():
    s = torch.randn(8, 1024, device=DEV, dtype=torch.bfloat16,
                    requires_grad=True)
    t = torch.randn(8, 1024, device=DEV, dtype=torch.bfloat16)
    y = torch.randint(0, 1024, (8,), device=DEV)
    x = torch.randn(8, 64, device=DEV, dtype=torch.bfloat16,
                    requires_grad=True)
    w = torch.randn(1024, 64, device=DEV, dtype=torch.bfloat16,
                    requires_grad=True)
    rows = {
        "empty autograd.Function, forward + backward":
            step(lambda: Empty.apply(s), s),
        "fused_ce_tvd mean, forward + backward":
            step(lambda: fused_ce_tvd(s, t, y), s),
        "linear_cross_entropy, forward + backward":
            step(lambda: linear_cross_entropy(x, w, y), x, w),
    }
    if LigerFusedLinearCrossEntropyFunction is not None:
        rows["Liger cross_entropy, forward + backward"] = step(
            lambda: LigerCrossEntropyFunction.apply(s, y, None)[0], s)
        rows["Liger fused linear CE, forward + backward"] = step(
            lambda: LigerFusedLinearCrossEntropyFunction.apply(x, w, y)[0],
            x, w)
    with torch.no_grad():
        emit(kind="host", what="fused_ce_tvd mean, no grad, one call",
             us=host_us(lambda: fused_ce_tvd(s, t, y)))
        emit(kind="host", what="the C ABI call alone (reduced CE+TVD)",
             us=host_us(c_call_alone(s.detach(), t, y)))
        profile("fused_ce_tvd mean, no grad", lambda: fused_ce_tvd(s, t, y))
    for what, fn in rows.items():
        emit(kind="host", what=what, us=host_us(fn, 1000))
    profile("fused_ce_tvd mean, forward + backward",
            rows["fused_ce_tvd mean, forward + backward"], 1000)
    for what in ("fused_ce_tvd mean, forward + backward",
                 "linear_cross_entropy, forward + backward"):
        emit(kind="host", what=what + ", CUDA graph replay",
             us=host_us(graphed(rows[what]), 1000))


def kernels_ms(fn, calls=3):
    """The GPU time of fn's kernels, memcpys and memsets per call (the
    profiler's device events): what the wall time is beside."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile as torch_profile
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.time_range.elapsed_us() for e in prof.events()
               if e.device_type == DeviceType.CUDA) / calls / 1e3


def idle_gaps(fn, top=8):
    """The longest idle stretches of the GPU inside one call of fn (after
    one untimed call), with the kernels on either side: where a step waits
    for its host."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile as torch_profile
    fn()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                key=lambda e: e.time_range.start)
    gaps = [(b.time_range.start - a.time_range.end, a.name[:60], b.name[:60])
            for a, b in zip(ev, ev[1:])]
    gaps.sort(reverse=True)
    return {"idle_us_total": sum(g for g, _, _ in gaps if g > 0),
            "longest": [f"{g:.0f} us after {a} before {b}"
                        for g, a, b in gaps[:top]]}


def timed(name, fn, check=None, kernels=False, **meta):
    """fwd+bwd median ms, peak MiB, (kernels) the sum of its kernels' time
    and (check) the max difference of the loss from a reference value."""
    row = dict(meta, provider=name)
    try:
        fn()
        row["fwd_bwd_ms"] = do_bench(fn, rep=300)
        row["peak_MiB"] = peak_mib(fn)
        if kernels:
            row["kernels_ms"] = kernels_ms(fn)
            row.update(idle_gaps(fn))
        if check is not None:
            row.update(check())
    except Exception as e:  # out of memory, a peer's failure: report, go on
        row["error"] = repr(e)[:300]
    emit(**row)
    torch.cuda.empty_cache()
    return row


def cetvd(bt=4096, v=151936):
    """CE+TVD: mean loss and its gradient (the peers' data: student
    N(0, 2^2), teacher = student + N(0, 0.5^2), every 7th row ignored)."""
    g = torch.Generator(device=DEV).manual_seed(0)
    s0 = (torch.randn(bt, v, device=DEV, generator=g) * 2).bfloat16()
    t = (s0.float() + 0.5 * torch.randn(bt, v, device=DEV, generator=g)
         ).bfloat16()
    y = torch.randint(0, v, (bt,), device=DEV, generator=g)
    y[::7] = -100
    meta = dict(kind="cetvd", BT=bt, V=v, dtype="bf16")

    def torch_ref(s):
        sf = s.float()
        ce = F.cross_entropy(sf, y, reduction="none", ignore_index=-100)
        tvd = 0.5 * (torch.softmax(sf, -1) - torch.softmax(t.float(), -1)
                     ).abs().sum(-1) * (y != -100)
        return (ce.sum() + tvd.sum()) / (y != -100).sum()

    s = s0.clone().requires_grad_()
    with torch.no_grad():
        want = torch_ref(s0).item()
    check = lambda: {"loss_diff": abs(fused_ce_tvd(s, t, y).item() - want)}
    tj = step(lambda: fused_ce_tvd(s, t, y), s)
    timed("tilejit", tj, check, kernels=True, **meta)
    timed("tilejit CUDA graph", graphed(tj), **meta)
    buf = s0.clone().requires_grad_()

    def in_place():
        with torch.no_grad():
            buf.copy_(s0)  # the in-place call overwrites the logits
        fused_ce_tvd(buf, t, y, in_place=True).backward()
        buf.grad = None
    timed("tilejit in_place (with a copy of the logits)", in_place, **meta)
    timed("torch", step(lambda: torch_ref(s), s), **meta)
    compiled = torch.compile(torch_ref)
    timed("torch.compile", step(lambda: compiled(s), s), **meta)


def lce(n=8192, d=4096, v=128256):
    """Linear CE, mean over the rows, every 5th ignored (h ~ N(0, 0.5^2),
    W ~ N(0, 0.02^2))."""
    g = torch.Generator(device=DEV).manual_seed(0)
    h = (torch.randn(n, d, device=DEV, generator=g) * 0.5).bfloat16()
    w = (torch.randn(v, d, device=DEV, generator=g) * 0.02).bfloat16()
    y = torch.randint(0, v, (n,), device=DEV, generator=g)
    y[4::5] = -100
    h.requires_grad_()
    w.requires_grad_()
    meta = dict(kind="lce", N=n, d=d, V=v, dtype="bf16")

    def torch_ref(a, b):
        return F.cross_entropy((a @ b.T).float(), y, ignore_index=-100)

    with torch.no_grad():
        want = torch_ref(h, w).item()
    budget = 512 << 20
    tj = lambda: linear_cross_entropy(h, w, y, memory_budget=budget)
    check = lambda: {"loss_diff": abs(tj().item() - want)}
    timed("tilejit (512 MiB budget)", step(tj, h, w), check, kernels=True,
          **meta)
    timed("tilejit CUDA graph", graphed(step(tj, h, w)), **meta)
    for gemm in ("tilejit", "auto"):  # the DSL's GEMMs, logits folded
        run = lambda gemm=gemm: linear_cross_entropy(
            h, w, y, memory_budget=budget, gemm=gemm)
        timed(f"tilejit gemm={gemm}", step(run, h, w),
              lambda run=run: {"loss_diff": abs(run().item() - want)},
              kernels=True, **meta)
    compiled = torch.compile(torch_ref)
    timed("torch.compile", step(lambda: compiled(h, w), h, w), **meta)
    if LigerFusedLinearCrossEntropyFunction is not None:
        timed("Liger", step(lambda: LigerFusedLinearCrossEntropyFunction.apply(
            h, w, y)[0], h, w), **meta)


def main():
    parts = sys.argv[1:] or ["host", "cetvd", "lce"]
    emit(kind="setup", torch=torch.__version__,
         gpu=torch.cuda.get_device_name())
    for part in parts:
        try:
            {"host": host, "cetvd": cetvd, "lce": lce}[part]()
        except Exception as e:  # report, go on with the next part
            emit(kind=part, error=repr(e)[:400])
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
