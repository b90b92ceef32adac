"""linear_cross_entropy against PyTorch's own math in float64:
F.cross_entropy(input @ weight.T + bias, ...) plus the z-loss."""
import pytest
import torch
import torch.nn.functional as F

from tilejit.torch import FusedLinearCrossEntropyLoss, linear_cross_entropy

N, D, V = 7, 16, 300


def reference(x, w, y, b=None, *, ce_weight=None, ignore_index=-100,
              lse_square_scale=0.0, label_smoothing=0.0, reduction="mean",
              softcap=None):
    z = x.double() @ w.double().T
    if b is not None:
        z = z + b.double()
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    cw = None if ce_weight is None else ce_weight.double()
    loss = F.cross_entropy(z, y, weight=cw, ignore_index=ignore_index,
                           label_smoothing=label_smoothing,
                           reduction=reduction)
    valid = y != ignore_index
    zl = lse_square_scale * torch.logsumexp(z, -1) ** 2 * valid
    if reduction == "none":
        return loss + zl, zl
    zl = zl.sum() / valid.sum() if reduction == "mean" else zl.sum()
    return loss + zl, zl


def make(dtype=torch.float32, bias=True):
    x = torch.randn(N, D).to(dtype)
    w = (torch.randn(V, D) / 4).to(dtype)
    b = torch.randn(V).to(dtype) if bias else None
    y = torch.randint(0, V, (N,))
    y[1] = -100
    return x, w, y, b


def run(fn, x, w, y, b, **kw):
    leaves = [t.detach().clone().requires_grad_() if t is not None else None
              for t in (x, w, b)]
    loss, zl = fn(*leaves[:2], y, leaves[2], **kw)
    (loss.sum() * 1.5).backward()
    return (loss, zl, *[t.grad if t is not None else None for t in leaves])


def close(got, want, tol):
    for g, r in zip(got, want):
        if r is None:
            assert g is None
            continue
        torch.testing.assert_close(g.double(), r.double(), rtol=tol, atol=tol)


CASES = [
    dict(),
    dict(reduction="sum", label_smoothing=0.1),
    dict(ce_weight=torch.rand(V) + 0.5, label_smoothing=0.2),
    dict(lse_square_scale=1e-2, softcap=3.0),
    dict(reduction="none", lse_square_scale=1e-2, ce_weight=torch.rand(V)),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(kw) or "plain")
def test_f32_against_torch(kw):
    x, w, y, b = make()
    got = run(lambda *a, **k: linear_cross_entropy(*a, return_z_loss=True, **k),
              x, w, y, b, **kw)
    want = run(reference, x.double(), w.double(), y, b.double(), **kw)
    assert got[0].dtype == torch.float32
    assert got[2].dtype == x.dtype and got[3].dtype == w.dtype
    close(got, want, 2e-5)


def test_bf16_no_bias_chunks():
    x, w, y, _ = make(torch.bfloat16, bias=False)
    got = run(lambda *a, **k: linear_cross_entropy(*a, return_z_loss=True, **k),
              x, w, y, None, chunk_rows=3)
    want = run(reference, x.double(), w.double(), y, None)
    assert got[2].dtype == got[3].dtype == torch.bfloat16
    close(got, want, 3e-2)


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.1,
                                            lse_square_scale=1e-2, softcap=3.0,
                                            reduction="none")],
                         ids=["plain", "features"])
def test_bf16_tilejit_gemms(kw):
    """gemm="tilejit": the DSL's GEMMs, the logits folded with their row
    statistics (the interpreter, on the CPU), at bf16 tolerances."""
    x, w, y, b = make(torch.bfloat16)
    got = run(lambda *a, **k: linear_cross_entropy(*a, return_z_loss=True,
                                                   gemm="tilejit", **k),
              x, w, y, b, chunk_rows=4, **kw)
    want = run(reference, x.double(), w.double(), y, b.double(), **kw)
    close(got, want, 3e-2)


def test_bias_dtype_follows_parameter():
    x, w, y, b = make(torch.bfloat16)
    got = run(lambda *a, **k: linear_cross_entropy(*a, return_z_loss=True, **k),
              x, w, y, b, memory_budget=1 << 12)
    want = run(reference, x.double(), w.double(), y, b.double())
    assert got[4].dtype == torch.bfloat16
    close(got, want, 3e-2)


def test_module_like_liger_and_strides():
    x, w, y, b = make()
    xs = torch.randn(N, D + 5)[:, :D].copy_(x).reshape(1, N, D)
    m = FusedLinearCrossEntropyLoss(label_smoothing=0.1, reduction="sum")
    loss = m(w, xs, y.reshape(1, N), b)
    ref, _ = reference(x, w, y, b, label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss.double(), ref, rtol=2e-5, atol=2e-5)
    wt = w.t().contiguous().t()  # column-strided weight
    torch.testing.assert_close(linear_cross_entropy(x, wt, y, b).double(),
                               reference(x, w, y, b)[0], rtol=2e-5, atol=2e-5)


def test_bad_target_flag():
    x, w, y, b = make()
    y[4] = V
    loss, bad = linear_cross_entropy(x, w, y, b, return_bad_target=True)
    assert int(bad[0]) == 5
    keep = y < V
    ref, _ = reference(x[keep], w, y[keep], b)
    torch.testing.assert_close(loss.double(), ref, rtol=2e-5, atol=2e-5)


def test_bad_inputs():
    x, w, y, b = make()
    with pytest.raises(ValueError, match="weight"):
        linear_cross_entropy(x, w[:, :5], y)
    with pytest.raises(TypeError, match="weight torch.float16"):
        linear_cross_entropy(x, w.half(), y)
    with pytest.raises(ValueError, match="bias"):
        linear_cross_entropy(x, w, y, b[:4])
    with pytest.raises(ValueError, match="label_smoothing"):
        linear_cross_entropy(x, w, y, label_smoothing=1.5)
    with pytest.raises(ValueError, match="softcap"):
        linear_cross_entropy(x, w, y, softcap=0.0)
    with pytest.raises(TypeError, match="int64|float64"):
        linear_cross_entropy(x.double(), w.double(), y)
    with pytest.raises(ValueError, match="reduction"):
        FusedLinearCrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="gemm"):
        linear_cross_entropy(x, w, y, gemm="cutlass")
    with pytest.raises(TypeError, match="bf16 or f16"):
        linear_cross_entropy(x, w, y, gemm="tilejit")


def test_second_backward_is_refused():
    # backward scales the saved gradients in place: once only.
    x = torch.randn(6, 8, requires_grad=True)
    w = torch.randn(40, 8, requires_grad=True)
    y = torch.randint(0, 40, (6,))
    loss = linear_cross_entropy(x, w, y) * 3.0
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        loss.backward()


def test_frozen_weight_gets_no_gradient():
    x = torch.randn(6, 8, requires_grad=True)
    w = torch.randn(40, 8)  # frozen, as in LoRA
    y = torch.randint(0, 40, (6,))
    (linear_cross_entropy(x, w, y) * 0.5).backward()
    ref = x.detach().clone().requires_grad_()
    (torch.nn.functional.cross_entropy(ref @ w.T, y) * 0.5).backward()
    torch.testing.assert_close(x.grad, ref.grad, rtol=1e-4, atol=1e-6)
    assert w.grad is None
