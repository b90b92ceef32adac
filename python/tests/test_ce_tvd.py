"""fused_ce_tvd against a float64 CE+TVD written with torch.softmax."""
import pytest
import torch
import torch.nn.functional as F

from tilejit.torch import FusedCETVDLoss, fused_ce_tvd

V = 257


def reference(student, teacher, target, alpha=1.0, beta=1.0,
              ignore_index=-100, reduction="mean"):
    s = student.double().reshape(-1, student.size(-1))
    t = teacher.double().reshape(-1, teacher.size(-1))
    y = target.reshape(-1)
    valid = y != ignore_index
    ce = F.cross_entropy(s, y, ignore_index=ignore_index, reduction="none")
    tvd = 0.5 * (torch.softmax(s, -1) - torch.softmax(t, -1)).abs().sum(-1)
    tvd = tvd * valid
    if reduction == "none":
        return alpha * ce, beta * tvd
    total = alpha * ce.sum() + beta * tvd.sum()
    return total / valid.sum() if reduction == "mean" else total


def make(bt=6, v=V, dtype=torch.float32, ignore=(2,)):
    student = (torch.randn(bt, v) * 2).to(dtype)
    teacher = (student.float() + torch.randn(bt, v)).to(dtype)
    target = torch.randint(0, v, (bt,))
    for i in ignore:
        target[i] = -100
    return student, teacher, target


def grads(fn, student, *args, **kw):
    s = student.detach().clone().requires_grad_()
    out = fn(s, *args, **kw)
    (out if torch.is_tensor(out) else sum(o.sum() for o in out)).sum().backward()
    return out, s.grad


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_reduced_f32(reduction):
    s, t, y = make()
    kw = dict(alpha=0.7, beta=1.3, reduction=reduction)
    loss, g = grads(fused_ce_tvd, s, t, y, **kw)
    ref, gref = grads(reference, s.double(), t, y, **kw)
    assert loss.dtype == torch.float32 and loss.shape == ()
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g.double(), gref, rtol=1e-4, atol=1e-5)


def test_grad_output_scales():
    s, t, y = make()
    a = s.clone().requires_grad_()
    (fused_ce_tvd(a, t, y) * 3.0).backward()
    _, g = grads(fused_ce_tvd, s, t, y)
    torch.testing.assert_close(a.grad, 3 * g)


def test_none_f32():
    s, t, y = make()
    (ce, tvd), g = grads(fused_ce_tvd, s, t, y, reduction="none", alpha=0.5)
    (rce, rtvd), gref = grads(reference, s.double(), t, y, reduction="none",
                              alpha=0.5)
    assert ce.shape == tvd.shape == (6,)
    torch.testing.assert_close(ce.double(), rce, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tvd.double(), rtvd, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g.double(), gref, rtol=1e-4, atol=1e-5)


def test_none_one_output_used():
    s, t, y = make()
    a = s.clone().requires_grad_()
    fused_ce_tvd(a, t, y, reduction="none")[1].sum().backward()
    b = s.double().requires_grad_()
    reference(b, t, y, reduction="none")[1].sum().backward()
    torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 2e-2),
                                       (torch.float16, 2e-3)])
def test_half_dtypes(dtype, tol):
    s, t, y = make(dtype=dtype)
    loss, g = grads(fused_ce_tvd, s, t, y)
    ref, gref = grads(reference, s.double(), t, y)
    assert g.dtype == dtype
    torch.testing.assert_close(loss.double(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(g.double(), gref, rtol=tol, atol=tol)


def test_leading_dims_and_strides():
    # student: rows of a wider buffer; teacher contiguous (another stride).
    wide = torch.randn(2, 3, V + 11) * 2
    s = wide[..., :V]
    t = torch.randn(2, 3, V)
    y = torch.randint(0, V, (2, 3))
    loss, g = grads(fused_ce_tvd, s, t, y)
    ref, gref = grads(reference, s.double(), t, y)
    assert g.shape == s.shape
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g.double(), gref, rtol=1e-4, atol=1e-5)
    # column-strided (transposed) student
    st = torch.randn(V, 4).t()
    tt, yy = torch.randn(4, V), torch.randint(0, V, (4,))
    torch.testing.assert_close(fused_ce_tvd(st, tt, yy).double(),
                               reference(st, tt, yy), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("in_place", [False, True])
def test_second_backward_is_refused(in_place):
    # The saved gradient is scaled in place by the first backward: a second
    # one through the same graph must fail, not scale it twice.
    s, t, y = make()
    leaf = s.clone().requires_grad_()
    loss = fused_ce_tvd(leaf * 1, t, y, in_place=in_place) * 2.0
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        loss.backward()


def test_in_place():
    s, t, y = make()
    ref, gref = grads(reference, s.double(), t, y)
    buf = s.clone()
    leaf = buf.requires_grad_()
    loss = fused_ce_tvd(leaf, t, y, in_place=True)
    loss.backward()
    assert leaf.grad.data_ptr() == leaf.data_ptr()  # over the student
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(leaf.grad.double(), gref, rtol=1e-4, atol=1e-5)


def test_bad_target_flag_and_module():
    s, t, y = make(ignore=())
    y[3] = V + 5
    m = FusedCETVDLoss(reduction="sum")
    loss = m(s, t, y)
    assert int(m.bad_target[0]) == 4
    with pytest.raises(ValueError, match="row 3"):
        m.check_targets()
    keep = y != V + 5
    ref = reference(s[keep], t[keep], y[keep], reduction="sum")
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-5)
    _, bad = fused_ce_tvd(s, t, y, reduction="none", return_bad_target=True)
    assert int(bad[0]) == 4


def test_bad_inputs():
    s, t, y = make(bt=2, v=8, ignore=())
    with pytest.raises(ValueError, match="alike"):
        fused_ce_tvd(s, t[:, :7], y)
    with pytest.raises(TypeError, match="float64"):
        fused_ce_tvd(s.double(), t.double(), y)
    with pytest.raises(TypeError, match="teacher"):
        fused_ce_tvd(s, t.half(), y)
    with pytest.raises(TypeError, match="class indices"):
        fused_ce_tvd(s, t, y.float())
    with pytest.raises(ValueError, match="elements"):
        fused_ce_tvd(s, t, y[:1])
    with pytest.raises(ValueError, match="reduction"):
        fused_ce_tvd(s, t, y, reduction="avg")
    with pytest.raises(ValueError, match="tilejit runs on"):
        fused_ce_tvd(s.to("meta"), t.to("meta"), y.to("meta"))
