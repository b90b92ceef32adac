"""cross_entropy against PyTorch's F.cross_entropy in float64 (plus the
z-loss and softcap written out), values and gradients."""
import pytest
import torch
import torch.nn.functional as F

from tilejit.torch import cross_entropy

V = 300


def reference(x, y, weight=None, ignore_index=-100, reduction="mean",
              label_smoothing=0.0, lse_square_scale=0.0, softcap=None):
    x = x.double()
    if softcap:
        x = softcap * torch.tanh(x / softcap)
    w = None if weight is None else weight.double()
    ce = F.cross_entropy(x, y, weight=w, ignore_index=ignore_index,
                         reduction="none", label_smoothing=label_smoothing)
    valid = y != ignore_index
    zl = lse_square_scale * torch.logsumexp(x, -1) ** 2 * valid
    if reduction == "none":
        return ce + zl
    if reduction == "sum":
        return ce.sum() + zl.sum()
    den = (w[y.clamp(min=0)] * valid).sum() if w is not None else valid.sum()
    return ce.sum() / den + zl.sum() / valid.sum()


def make(bt=7, v=V, dtype=torch.float32):
    x = (torch.randn(bt, v) * 3).to(dtype)
    y = torch.randint(0, v, (bt,))
    y[2] = -100
    return x, y


def both(kw, x, y, dtype_tol=(1e-5, 1e-6)):
    a = x.detach().clone().requires_grad_()
    got = cross_entropy(a, y, **kw)
    (got * torch.linspace(0.5, 1.5, got.numel()).reshape(got.shape)).sum() \
        .backward()
    b = x.detach().double().requires_grad_()
    want = reference(b.reshape(-1, b.size(-1)), y.reshape(-1), **kw)
    want = want.reshape(got.shape)
    (want * torch.linspace(0.5, 1.5, want.numel()).double()
     .reshape(want.shape)).sum().backward()
    rtol, atol = dtype_tol
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)
    torch.testing.assert_close(a.grad.double(), b.grad, rtol=rtol * 10,
                               atol=atol * 10)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("features", [
    {}, {"label_smoothing": 0.1}, {"lse_square_scale": 1e-3},
    {"softcap": 5.0}, {"weight": "w"}, {"weight": "w", "label_smoothing": 0.2,
                                        "lse_square_scale": 1e-2,
                                        "softcap": 8.0}])
def test_matches_torch_f32(reduction, features):
    x, y = make()
    kw = dict(features, reduction=reduction)
    if kw.get("weight") == "w":
        kw["weight"] = torch.rand(V) + 0.5
    both(kw, x, y)


def test_bf16_leading_dims_and_v1():
    x, y = make(dtype=torch.bfloat16)
    both({}, x.reshape(7, 1, V), y.reshape(7, 1), (2e-2, 2e-3))
    x1 = torch.randn(5, 1)
    y1 = torch.tensor([0, 0, -100, 0, 0])
    both({"label_smoothing": 0.3}, x1, y1)


def test_all_ignored_and_out_of_range():
    x, _ = make()
    y = torch.full((7,), -100)
    y[3] = V + 4  # outside [0, V): counted as ignored, and flagged
    a = x.clone().requires_grad_()
    loss, bad = cross_entropy(a, y, return_bad_target=True)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.count_nonzero(a.grad) == 0
    assert bad.tolist() == [4]  # 1 + the row
    empty = cross_entropy(torch.empty(0, V), torch.empty(0, dtype=torch.long))
    assert empty.item() == 0.0


def test_z_loss_and_errors():
    x, y = make()
    loss, z = cross_entropy(x, y, lse_square_scale=1e-2, return_z_loss=True)
    want = 1e-2 * (torch.logsumexp(x.double(), -1) ** 2)[y != -100].mean()
    torch.testing.assert_close(z.double(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(x, y, reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy(x, y, label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"weight \(3,\)"):
        cross_entropy(x, y, weight=torch.ones(3))
    with pytest.raises(TypeError, match="class indices"):
        cross_entropy(x, y.float())


def test_opcheck_and_compile():
    x, y = make()
    torch.library.opcheck(torch.ops.tilejit.cross_entropy,
                          (x.requires_grad_(), y, torch.rand(V), -100, 0.1,
                           1e-3, 0.0, 1))
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: cross_entropy(a, b, label_smoothing=0.1),
                      fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(x, y), cross_entropy(x, y,
                                                      label_smoothing=0.1))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_in_place(reduction):
    x, y = make()
    kw = dict(reduction=reduction, label_smoothing=0.1, softcap=6.0)
    b = x.double().requires_grad_()
    (reference(b, y, **kw) * 0.7).backward()
    leaf = x.clone().requires_grad_()
    loss = cross_entropy(leaf, y, in_place=True, **kw)
    (loss * 0.7).backward()
    torch.testing.assert_close(loss.double(),
                               reference(x.double(), y, **kw), rtol=1e-5,
                               atol=1e-6)
    torch.testing.assert_close(leaf.grad.double(), b.grad, rtol=1e-4,
                               atol=1e-6)
    assert leaf.grad.data_ptr() == leaf.data_ptr()  # over the logits
    with pytest.raises(ValueError, match="in_place"):
        cross_entropy(x, y, reduction="none", in_place=True)
    torch._dynamo.reset()
    f = torch.compile(lambda a: cross_entropy(a, y, in_place=True),
                      backend="aot_eager", fullgraph=True)
    # Dynamo may wrap the error; its text names the refusal or says that
    # the traced code raised.
    with pytest.raises(Exception, match="eager mode only|Observed exception"):
        f(x.clone())


@pytest.mark.parametrize("in_place", [False, True])
def test_f16_mean_keeps_small_entries_under_a_loss_scale(in_place):
    # p / BT of many non-target classes is below f16's smallest
    # subnormal; a GradScaler's factor (here 2^16) must still find them.
    x = (torch.randn(64, V) * 3).half()
    y = torch.randint(0, V, (64,))
    leaf = x.clone().requires_grad_()
    (cross_entropy(leaf, y, in_place=in_place) * 65536.0).backward()
    b = x.double().requires_grad_()
    (reference(b, y) * 65536.0).backward()
    # Entries whose probability is at least 1e-4: stored at the mean's
    # scale (p / 64) they would be f16 subnormals, a few digits at best.
    kept = b.grad.abs() >= 65536.0 / 64 * 1e-4
    torch.testing.assert_close(leaf.grad.double()[kept],
                               b.grad.half().double()[kept], rtol=2e-3,
                               atol=0)
