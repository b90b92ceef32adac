"""kl_div against F.kl_div on float64 log-softmaxed logits, forward and
reverse, values and gradients."""
import pytest
import torch
import torch.nn.functional as F

from tilejit.torch import kl_div

V = 257


def reference(s, t, target, temperature, reverse, reduction):
    ls = F.log_softmax(s.double() / temperature, -1)
    lt = F.log_softmax(t.double() / temperature, -1)
    a, b = (lt, ls) if reverse else (ls, lt)  # F.kl_div(input, target)
    rows = F.kl_div(a, b, log_target=True, reduction="none").sum(-1)
    if target is not None:
        rows = rows * (target != -100)
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    n = (target != -100).sum() if target is not None else rows.numel()
    return rows.sum() / n


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("labels", [False, True])
def test_matches_torch(reduction, reverse, labels):
    s = torch.randn(6, V) * 2
    t = s + torch.randn(6, V)
    y = torch.randint(0, V, (6,)) if labels else None
    if labels:
        y[1] = -100
    kw = dict(temperature=1.7, reverse=reverse, reduction=reduction)
    a = s.clone().requires_grad_()
    got = kl_div(a, t, y, **kw)
    weights = torch.linspace(0.5, 1.5, got.numel()).reshape(got.shape)
    (got * weights).sum().backward()
    b = s.double().requires_grad_()
    want = reference(b, t, y, 1.7, reverse, reduction)
    (want * weights.double()).sum().backward()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-7)


def test_bf16_leading_dims_and_errors():
    s = (torch.randn(2, 3, V) * 2).bfloat16()
    t = (s.float() + torch.randn(2, 3, V)).bfloat16()
    got = kl_div(s, t, reduction="none")
    assert got.shape == (2, 3)
    want = reference(s.reshape(-1, V), t.reshape(-1, V), None, 1.0, False,
                     "none").reshape(2, 3)
    torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=1e-3)
    with pytest.raises(ValueError, match="temperature"):
        kl_div(s, t, temperature=0)
    with pytest.raises(ValueError, match="reduction"):
        kl_div(s, t, reduction="mean")
    with pytest.raises(TypeError, match="teacher torch.float32"):
        kl_div(s, t.float())


def test_opcheck_and_compile():
    s = torch.randn(4, V, requires_grad=True)
    t = torch.randn(4, V)
    y = torch.tensor([1, -100, 3, 4])
    torch.library.opcheck(torch.ops.tilejit.kl_div,
                          (s, t, y, 2.0, True, -100, 1))
    torch._dynamo.reset()
    f = torch.compile(lambda a, b, c: kl_div(a, b, c, reverse=True),
                      fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(s, t, y), kl_div(s, t, y, reverse=True))


def test_large_common_offset():
    # Logits sharing an offset of 1e3: the same divergence as without it.
    s = torch.randn(4, V)
    t = s + 0.5 * torch.randn(4, V)
    for reverse in (False, True):
        near = kl_div(s, t, reverse=reverse)
        far = kl_div(s + 1e3, t + 1e3, reverse=reverse)
        torch.testing.assert_close(far, near, rtol=1e-4, atol=1e-5)
