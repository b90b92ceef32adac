"""The losses on a GPU (skipped without one): against float64 PyTorch,
with no host synchronization inside the ops, and inside torch.compile."""
import pytest
import torch

from tilejit.torch import fused_ce_tvd, linear_cross_entropy

from test_ce_tvd import reference as ce_tvd_reference
from test_linear_ce import reference as lce_reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device")


@pytest.fixture
def no_sync():
    torch.cuda.set_sync_debug_mode("error")
    yield
    torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4),
                                       (torch.bfloat16, 2e-2)])
def test_ce_tvd_cuda(dtype, tol, no_sync):
    bt, v = 64, 32000
    s = (torch.randn(bt, v + 64, device="cuda") * 2)[:, :v].to(dtype)
    t = torch.randn(bt, v, device="cuda").to(dtype)
    y = torch.randint(0, v, (bt,), device="cuda")
    y[::5] = -100
    leaf = s.detach().clone().requires_grad_()
    loss = fused_ce_tvd(leaf, t, y, alpha=0.5)
    loss.backward()
    torch.cuda.set_sync_debug_mode("default")
    ref_leaf = s.detach().double().requires_grad_()
    ref = ce_tvd_reference(ref_leaf, t, y, alpha=0.5)
    ref.backward()
    torch.testing.assert_close(loss.double(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(leaf.grad.double(), ref_leaf.grad, rtol=tol,
                               atol=tol * 1e-2)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_ce_cuda(reduction, no_sync):
    n, d, v = 512, 256, 8192
    x = torch.randn(n, d, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(v, d, device="cuda") / 16).to(torch.bfloat16)
    y = torch.randint(0, v, (n,), device="cuda")
    xl, wl = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss = linear_cross_entropy(xl, wl, y, label_smoothing=0.1,
                                reduction=reduction, chunk_rows=128)
    loss.sum().backward()
    torch.cuda.set_sync_debug_mode("default")
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    ref, _ = lce_reference(xr, wr, y, label_smoothing=0.1, reduction=reduction)
    ref.sum().backward()
    torch.testing.assert_close(loss.double(), ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(xl.grad.double(), xr.grad, rtol=5e-2, atol=5e-3)
    torch.testing.assert_close(wl.grad.double(), wr.grad, rtol=5e-2, atol=5e-3)


def test_compile_cuda():
    x = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    w = torch.randn(4096, 128, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    y = torch.randint(0, 4096, (256,), device="cuda")
    f = torch.compile(lambda a, b, c: linear_cross_entropy(a, b, c) * 2,
                      fullgraph=True)
    got = f(x, w, y)
    got.backward()
    torch.testing.assert_close(got, linear_cross_entropy(x, w, y) * 2)


def _graph(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # the first call compiles and prepares: never inside capture
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def test_cuda_graph_replays_forward_and_backward():
    # Both losses, forward + backward with an upstream factor, captured
    # once and replayed on new inputs copied into the captured ones.
    bt, v, n, d = 64, 4096, 256, 128
    s = torch.empty(bt, v, device="cuda", requires_grad=True)
    t = torch.empty(bt, v, device="cuda")
    y = torch.empty(bt, dtype=torch.int64, device="cuda")
    x = torch.empty(n, d, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    w = torch.empty(v, d, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    yl = torch.empty(n, dtype=torch.int64, device="cuda")
    out = {}

    def fill(seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        with torch.no_grad():
            s.copy_(torch.randn(bt, v, device="cuda", generator=gen) * 2)
            t.copy_(torch.randn(bt, v, device="cuda", generator=gen))
            y.copy_(torch.randint(0, v, (bt,), device="cuda", generator=gen))
            x.copy_(torch.randn(n, d, device="cuda", generator=gen))
            w.copy_(torch.randn(v, d, device="cuda", generator=gen) / 16)
            yl.copy_(torch.randint(0, v, (n,), device="cuda", generator=gen))

    def fwd_bwd():
        for leaf in (s, x, w):
            leaf.grad = None
        a = fused_ce_tvd(s, t, y)
        b = linear_cross_entropy(x, w, yl)
        (0.5 * a + 2.0 * b).backward()
        out["loss"] = (a.detach(), b.detach())
        out["grads"] = (s.grad, x.grad, w.grad)

    fill(0)
    g = _graph(fwd_bwd)
    fill(1)
    g.replay()
    torch.cuda.synchronize()
    got = [o.clone() for o in out["loss"] + out["grads"]]
    fill(1)
    fwd_bwd()  # eager, the same inputs
    want = list(out["loss"] + out["grads"])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_tune_then_compile_tuned(tmp_path, monkeypatch):
    import tilejit
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    sizes = {"BT": 64, "V": 4096}
    best = tilejit.tune("jsd", "bf16", sizes, repetitions=3)
    assert set(best) >= {"BLOCK_SIZE", "num_warps"}
    k = tilejit.kernel("jsd", "bf16", tuned=True, shape=sizes)
    assert k.config_source.startswith("tuned"), k.config_source
    assert all(k.meta[p] == v for p, v in best.items())
    assert tilejit.tune("jsd", "bf16", sizes, repetitions=3) == best


def test_dump_dir_from_python(tmp_path):
    # TILEJIT_DUMP_DIR: every stage of a kernel compiled by a Python call.
    import os
    import subprocess
    import sys
    code = ("import tilejit; tilejit.kernel('jsd', 'bf16', BLOCK_SIZE=1024)"
            ".compile_gpu()")
    env = dict(os.environ, TILEJIT_DUMP_DIR=str(tmp_path / "dump"),
               TILEJIT_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    (entry,) = (tmp_path / "dump").iterdir()
    assert entry.name.startswith("jsd-")
    names = {p.name for p in entry.iterdir()}
    assert {"0-built.mlir", "3-kernel.cu", "4-kernel.ptx",
            "5-kernel.cubin"} <= names, names


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_cuda(reduction, no_sync):
    from tilejit.torch import cross_entropy
    bt, v = 64, 32000
    x = (torch.randn(bt, v, device="cuda") * 2).to(torch.bfloat16)
    y = torch.randint(0, v, (bt,), device="cuda")
    y[::5] = -100
    w = torch.rand(v, device="cuda") + 0.5
    leaf = x.clone().requires_grad_()
    kw = dict(weight=w, label_smoothing=0.1, reduction=reduction)
    loss = cross_entropy(leaf, y, **kw)
    loss.sum().backward()
    torch.cuda.set_sync_debug_mode("default")
    ref_leaf = x.double().requires_grad_()
    ref = torch.nn.functional.cross_entropy(ref_leaf, y, weight=w.double(),
                                            **{k: kw[k] for k in kw
                                               if k != "weight"})
    ref.sum().backward()
    torch.testing.assert_close(loss.double(), ref, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(leaf.grad.double(), ref_leaf.grad, rtol=2e-2,
                               atol=1e-5)


def test_cross_entropy_in_place_cuda(no_sync):
    # The gradient over the logits on the GPU, where other warps of a row's
    # program still read them: targets in late tiles, every feature on.
    from tilejit.torch import cross_entropy
    bt, v = 48, 50000
    x = (torch.randn(bt, v, device="cuda") * 2).to(torch.bfloat16)
    y = torch.randint(v - 3000, v, (bt,), device="cuda")
    y[::6] = -100
    kw = dict(label_smoothing=0.1, lse_square_scale=1e-3, softcap=20.0)
    leaf = x.clone().requires_grad_()
    loss = cross_entropy(leaf, y, in_place=True, **kw)
    loss.backward()
    torch.cuda.set_sync_debug_mode("default")
    ref_leaf = x.clone().requires_grad_()
    ref = cross_entropy(ref_leaf, y, **kw)
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(leaf.grad, ref_leaf.grad)


@pytest.mark.parametrize("reverse", [False, True])
def test_kl_div_cuda(reverse, no_sync):
    from tilejit.torch import kl_div
    from test_kl_div import reference as kl_reference
    bt, v = 32, 32000
    s = (torch.randn(bt, v, device="cuda") * 2).to(torch.bfloat16)
    t = (s.float() + torch.randn(bt, v, device="cuda")).to(torch.bfloat16)
    y = torch.randint(0, v, (bt,), device="cuda")
    y[::4] = -100
    leaf = s.clone().requires_grad_()
    loss = kl_div(leaf, t, y, temperature=2.0, reverse=reverse)
    loss.backward()
    torch.cuda.set_sync_debug_mode("default")
    ref_leaf = s.double().requires_grad_()
    ref = kl_reference(ref_leaf, t, y, 2.0, reverse, "batchmean")
    ref.backward()
    torch.testing.assert_close(loss.double(), ref, rtol=2e-3, atol=1e-4)
    torch.testing.assert_close(leaf.grad.double(), ref_leaf.grad, rtol=3e-2,
                               atol=1e-7)
