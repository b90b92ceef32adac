"""jsd against the generalized JSD written with torch in float64 (Liger's
definition: beta 0 the forward KL, 1 the reverse), values and gradients."""
import pytest
import torch

from tilejit.torch import jsd, jsd_logits

V = 211


def reference(x, y, target, beta, reduction):
    x, y = x.double(), y.double()
    q, p = x.exp(), y.exp()
    if beta == 0:
        rows = (p * (y - x)).sum(-1)
    elif beta == 1:
        rows = (q * (x - y)).sum(-1)
    else:
        logm = torch.log(beta * p + (1 - beta) * q)
        rows = (beta * p * (y - logm) + (1 - beta) * q * (x - logm)).sum(-1)
    if target is not None:
        rows = rows * (target != -100)
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    n = (target != -100).sum() if target is not None else rows.numel()
    return rows.sum() / n


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0])
def test_matches_torch(reduction, beta):
    x = torch.log_softmax(torch.randn(5, V) * 2, -1)
    y = torch.log_softmax(torch.randn(5, V) * 2, -1)
    target = torch.randint(0, V, (5,))
    target[3] = -100
    a = x.clone().requires_grad_()
    got = jsd(a, y, target, beta=beta, reduction=reduction)
    w = torch.linspace(0.5, 1.5, got.numel()).reshape(got.shape)
    (got * w).sum().backward()
    b = x.double().requires_grad_()
    want = reference(b, y, target, beta, reduction)
    (want * w.double()).sum().backward()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-7)


def test_errors_and_opcheck():
    x = torch.log_softmax(torch.randn(4, V), -1)
    with pytest.raises(ValueError, match="beta"):
        jsd(x, x, beta=1.5)
    with pytest.raises(ValueError, match="alike"):
        jsd(x, x[:, :-1])
    torch.library.opcheck(torch.ops.tilejit.jsd,
                          (x.clone().requires_grad_(), x.flip(0), None, 0.5,
                           -100, 1))


@pytest.mark.parametrize("reduction", ["batchmean", "none"])
@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_logits_match_torch_through_log_softmax(reduction, beta):
    # jsd_logits is jsd of log_softmax(logits / T); autograd through
    # log_softmax in float64 gives the reference gradient.
    s = torch.randn(2, 3, V) * 3
    t = torch.randn(2, 3, V) * 3
    target = torch.randint(0, V, (2, 3))
    target[0, 1] = -100
    a = s.clone().requires_grad_()
    got = jsd_logits(a, t, target, beta=beta, temperature=1.7,
                     reduction=reduction)
    w = torch.linspace(0.5, 1.5, got.numel()).reshape(got.shape)
    (got * w).sum().backward()
    b = s.double().requires_grad_()
    want = reference(torch.log_softmax(b / 1.7, -1),
                     torch.log_softmax(t.double() / 1.7, -1), target, beta,
                     reduction)
    (want * w.double()).sum().backward()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-7)


def test_logits_errors_and_opcheck():
    s = torch.randn(4, V)
    with pytest.raises(ValueError, match="temperature"):
        jsd_logits(s, s, temperature=0)
    with pytest.raises(ValueError, match="beta"):
        jsd_logits(s, s, beta=-0.1)
    torch.library.opcheck(torch.ops.tilejit.jsd_logits,
                          (s.clone().requires_grad_(), s.flip(0),
                           torch.tensor([1, -100, 2, 3]), 0.5, 2.0, -100, 0))


@pytest.mark.parametrize("which", ["jsd", "jsd_logits", "kl_div"])
def test_in_place_gives_the_same_loss_and_gradient(which):
    from tilejit.torch import kl_div
    fn = {"jsd": jsd, "jsd_logits": jsd_logits, "kl_div": kl_div}[which]
    x = torch.randn(2, 3, V) * 2
    if which == "jsd":
        x = torch.log_softmax(x, -1)
    y = torch.log_softmax(torch.randn(2, 3, V) * 2, -1)
    target = torch.randint(0, V, (2, 3))
    target[1, 2] = -100
    a = x.clone().requires_grad_()
    want = fn(a, y, target, reduction="sum")
    (2 * want).backward()
    b = x.clone().requires_grad_()
    got = fn(b, y, target, reduction="sum", in_place=True)
    (2 * got).backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(b.grad, a.grad)
    assert b.grad.data_ptr() == b.data_ptr()  # written over the input
    with pytest.raises(ValueError, match="in_place"):
        fn(x.clone().requires_grad_(), y, target, reduction="none",
           in_place=True)
    with pytest.raises(ValueError, match="contiguous"):
        fn(x.clone().transpose(0, 1).requires_grad_(), y.transpose(0, 1),
           in_place=True)
