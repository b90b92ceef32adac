"""The row losses as PyTorch ops on the GPU beside their peers, one JSON line
per measurement: forward + backward of cross-entropy (the gradient in place
for tilejit and Liger), JSD and KL distillation at BT x V, bf16, every 7th
row ignored, and JSD of logits at a temperature. Time is triton's do_bench median (L2 flushed between calls),
peak memory is above the inputs, and each op's fraction of the roofline
counts the bytes it must move (cross-entropy in place: read and write the
logits, 2 units of BT V 2 B; JSD and KL: read both inputs, write the
gradient, 3 units) at the copy rate measured in the same process. Each
tilejit result is compared with an fp32 torch computation of the same math.

    TILEJIT_LIBRARY=.../libtilejit.so PYTHONPATH=python:.peers/liger \\
        python3 scripts/bench/row_losses.py [--bt 4096] [--vocab 151936]
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import tilejit.torch as tt

try:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.jsd import LigerJSDFunction
    from liger_kernel.ops.kl_div import LigerKLDivLossFunction
except ImportError as e:
    print(json.dumps({"liger": f"skipped: {e}"}), flush=True)
    LigerCrossEntropyFunction = LigerJSDFunction = LigerKLDivLossFunction = None

DEV = "cuda"


def emit(**row):
    print(json.dumps(row), flush=True)


def copy_tbps():
    a = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
    b = torch.empty_like(a)
    ms = do_bench(lambda: b.copy_(a))
    return 2 * a.numel() / ms / 1e9


def peak_mib(fn):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def measure(loss, name, fn, bytes_moved, tbps, **meta):
    try:
        ms = do_bench(fn)
        mib = peak_mib(fn)
    except Exception as e:  # a peer that cannot run this shape
        emit(loss=loss, impl=name, error=f"{type(e).__name__}: {e}"[:300])
        return
    roofline_ms = bytes_moved / tbps / 1e9
    emit(loss=loss, impl=name, ms=round(ms, 4),
         roofline=round(roofline_ms / ms, 3), peak_mib=round(mib, 1), **meta)


def rows(bt, v, dtype, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = (torch.randn(bt, v, device=DEV, generator=g) * 2).to(dtype)
    target = torch.randint(0, v, (bt,), device=DEV, generator=g)
    target[6::7] = -100
    return x, target


def backward_of(loss_fn, leaf):
    def run():
        leaf.grad = None
        loss_fn().backward()
    return run


def check(loss, got, want):
    err = (got.float() - want.float()).abs().max().item()
    emit(loss=loss, check="tilejit vs fp32 torch", max_abs_error=err,
         rel=err / max(want.float().abs().max().item(), 1e-30))


def cross_entropy(bt, v, dtype, tbps):
    x, target = rows(bt, v, dtype, 1)
    unit = bt * v * x.element_size()
    leaf = x.clone().requires_grad_(True)
    check("cross_entropy", tt.cross_entropy(leaf, target),
          F.cross_entropy(x.float(), target))

    # In place: the gradient overwrites the logits, as Liger's does (the
    # later calls run on earlier gradients: finite values, the same work).
    measure("cross_entropy", "tilejit in place", backward_of(
        lambda: tt.cross_entropy(leaf, target, in_place=True), leaf),
        2 * unit, tbps)
    measure("cross_entropy", "tilejit",
            backward_of(lambda: tt.cross_entropy(leaf, target), leaf),
            3 * unit, tbps)
    if LigerCrossEntropyFunction:
        measure("cross_entropy", "liger (in place)", backward_of(
            lambda: LigerCrossEntropyFunction.apply(
                leaf, target, None, -100, 0.0, 0.0, "mean")[0], leaf),
            2 * unit, tbps)
    compiled = torch.compile(lambda a, t: F.cross_entropy(a, t))
    measure("cross_entropy", "torch.compile",
            backward_of(lambda: compiled(leaf, target), leaf), 3 * unit, tbps)
    measure("cross_entropy", "eager",
            backward_of(lambda: F.cross_entropy(leaf, target), leaf),
            3 * unit, tbps)


def jsd_math(s, t, beta):
    s, t = s.float(), t.float()
    m = torch.logaddexp(s + math.log(1 - beta), t + math.log(beta))
    kl_p = (t.exp() * (t - m)).sum(-1)
    kl_q = (s.exp() * (s - m)).sum(-1)
    return beta * kl_p + (1 - beta) * kl_q


def jsd(bt, v, dtype, tbps, beta=0.5):
    s, target = rows(bt, v, dtype, 2)
    t, _ = rows(bt, v, dtype, 3)
    s = torch.log_softmax(s.float(), -1).to(dtype)
    t = torch.log_softmax(t.float(), -1).to(dtype)
    unit = bt * v * s.element_size()
    leaf = s.clone().requires_grad_(True)
    keep = target != -100
    want = jsd_math(s, t, beta)[keep].sum() / keep.sum()
    check("jsd", tt.jsd(leaf, t, target, beta=beta), want)
    measure("jsd", "tilejit",
            backward_of(lambda: tt.jsd(leaf, t, target, beta=beta), leaf),
            3 * unit, tbps)
    if LigerJSDFunction:
        measure("jsd", "liger", backward_of(
            lambda: LigerJSDFunction.apply(leaf, t, target, beta, -100), leaf),
            3 * unit, tbps)

    def torch_jsd(a, b, y):
        k = y != -100
        return (jsd_math(a, b, beta) * k).sum() / k.sum()
    compiled = torch.compile(torch_jsd)
    measure("jsd", "torch.compile",
            backward_of(lambda: compiled(leaf, t, target), leaf), 3 * unit,
            tbps)


def jsd_logits(bt, v, dtype, tbps, beta=0.5, temperature=2.0):
    s, target = rows(bt, v, dtype, 6)
    t, _ = rows(bt, v, dtype, 7)
    unit = bt * v * s.element_size()
    leaf = s.clone().requires_grad_(True)

    def torch_jsd(a, b, y):
        ls = torch.log_softmax(a.float() / temperature, -1)
        lt = torch.log_softmax(b.float() / temperature, -1)
        k = y != -100
        return (jsd_math(ls, lt, beta) * k).sum() / k.sum()
    check("jsd_logits", tt.jsd_logits(leaf, t, target, beta=beta,
                                      temperature=temperature),
          torch_jsd(s, t, target))
    measure("jsd_logits", "tilejit", backward_of(
        lambda: tt.jsd_logits(leaf, t, target, beta=beta,
                              temperature=temperature), leaf),
        3 * unit, tbps)
    if LigerJSDFunction:
        def liger():
            ls = torch.log_softmax(leaf / temperature, -1)
            lt = torch.log_softmax(t / temperature, -1)
            return LigerJSDFunction.apply(ls, lt, target, beta, -100)
        measure("jsd_logits", "liger (on torch log_softmax)",
                backward_of(liger, leaf), 3 * unit, tbps)
    compiled = torch.compile(torch_jsd)
    measure("jsd_logits", "torch.compile",
            backward_of(lambda: compiled(leaf, t, target), leaf), 3 * unit,
            tbps)


def kl_div(bt, v, dtype, tbps, temperature=2.0):
    s, target = rows(bt, v, dtype, 4)
    t, _ = rows(bt, v, dtype, 5)
    unit = bt * v * s.element_size()
    leaf = s.clone().requires_grad_(True)

    def torch_kl(a, b, y):
        ls = torch.log_softmax(a.float() / temperature, -1)
        lt = torch.log_softmax(b.float() / temperature, -1)
        per_row = (lt.exp() * (lt - ls)).sum(-1)
        k = y != -100
        return (per_row * k).sum() / k.sum()
    check("kl_div", tt.kl_div(leaf, t, target, temperature=temperature),
          torch_kl(s, t, target))
    measure("kl_div", "tilejit", backward_of(
        lambda: tt.kl_div(leaf, t, target, temperature=temperature), leaf),
        3 * unit, tbps)
    if LigerKLDivLossFunction:
        def liger():
            ls = torch.log_softmax(leaf / temperature, -1)
            lt = torch.log_softmax(t / temperature, -1)
            return LigerKLDivLossFunction.apply(ls, lt, "batchmean", True,
                                                1e-10)
        measure("kl_div", "liger (on torch log_softmax)",
                backward_of(liger, leaf), 3 * unit, tbps)
    compiled = torch.compile(torch_kl)
    measure("kl_div", "torch.compile",
            backward_of(lambda: compiled(leaf, t, target), leaf), 3 * unit,
            tbps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bt", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--losses", default="cross_entropy,jsd,jsd_logits,kl_div")
    a = p.parse_args()
    tbps = copy_tbps()
    emit(gpu=torch.cuda.get_device_name(), copy_tbps=round(tbps, 3),
         bt=a.bt, vocab=a.vocab, dtype="bf16", torch=torch.__version__)
    for name in a.losses.split(","):
        globals()[name](a.bt, a.vocab, torch.bfloat16, tbps)


if __name__ == "__main__":
    main()
