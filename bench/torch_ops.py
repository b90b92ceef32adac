"""Times tilejit's PyTorch ops on the GPU: the host time of one call (the
enqueue, measured on shapes whose kernels take microseconds) and forward +
backward at the main shapes (CUDA events, median), beside the same op timed
by `tilejit bench`.

    TILEJIT_LIBRARY=.../libtilejit.so PYTHONPATH=python python3 bench/torch_ops.py
"""
import statistics
import time

import torch

from tilejit.torch import fused_ce_tvd, linear_cross_entropy


def median_ms(fn, iters=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def step(loss_fn, *leaves):
    """One forward + backward with fresh gradients, as after
    optimizer.zero_grad(set_to_none=True)."""
    def run():
        for leaf in leaves:
            leaf.grad = None
        loss_fn().backward()
    return run


def host_us(fn, calls=2000):
    """Wall time per call of `fn` queued back to back (GPU work tiny)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


dev = "cuda"
torch.manual_seed(0)
print("torch", torch.__version__, torch.cuda.get_device_name())

# Host time per call: 8 rows of 1024, the kernels take a few microseconds.
s = torch.randn(8, 1024, device=dev, dtype=torch.bfloat16, requires_grad=True)
t = torch.randn(8, 1024, device=dev, dtype=torch.bfloat16)
y = torch.randint(0, 1024, (8,), device=dev)
with torch.no_grad():
    print(f"fused_ce_tvd mean, no grad: {host_us(lambda: fused_ce_tvd(s, t, y)):.1f} us per call")
print(f"fused_ce_tvd mean, forward + backward: "
      f"{host_us(step(lambda: fused_ce_tvd(s, t, y), s), 1000):.1f} us per step")
x = torch.randn(8, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(1024, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
print(f"linear_cross_entropy, forward + backward: "
      f"{host_us(step(lambda: linear_cross_entropy(x, w, y), x, w), 1000):.1f} us per step")

# The main shapes.
BT, V = 4096, 151936
s = (torch.randn(BT, V, device=dev) * 2).bfloat16().requires_grad_()
t = (s.detach().float() + 0.5 * torch.randn(BT, V, device=dev)).bfloat16()
y = torch.randint(0, V, (BT,), device=dev)
y[::7] = -100
ms = median_ms(step(lambda: fused_ce_tvd(s, t, y), s))
print(f"fused_ce_tvd mean {BT} x {V} bf16, loss + backward: {ms:.3f} ms")
del s, t
torch.cuda.empty_cache()
N, d, V = 8192, 4096, 128256
x = torch.randn(N, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
w = (torch.randn(V, d, device=dev) / d ** 0.5).bfloat16().requires_grad_()
y = torch.randint(0, V, (N,), device=dev)
y[4::5] = -100
budget = 512 << 20
ms = median_ms(step(lambda: linear_cross_entropy(x, w, y, memory_budget=budget),
                    x, w), iters=10)
print(f"linear_cross_entropy {N} x {d} x {V} bf16, 512 MiB budget, "
      f"forward + backward: {ms:.2f} ms ({6 * N * d * V / ms / 1e9:.0f} TFLOP/s)")
