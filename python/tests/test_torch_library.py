"""The ops as torch.library ops: opcheck, fake-tensor shapes, and
torch.compile(fullgraph=True) with no graph break."""
import shutil

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tilejit.torch  # noqa: F401  (registers torch.ops.tilejit)
from tilejit.torch import fused_ce_tvd, linear_cross_entropy

ops = torch.ops.tilejit
V = 40


def ce_tvd_inputs(bt=4, stride=V):
    s = torch.randn(bt, stride)[:, :V].requires_grad_()
    t = torch.randn(bt, V)
    y = torch.randint(0, V, (bt,))
    y[0] = -100
    return s, t, y


def lce_inputs(bias=True):
    x = torch.randn(5, 8, requires_grad=True)
    w = torch.randn(V, 8, requires_grad=True)
    b = torch.randn(V, requires_grad=True) if bias else None
    y = torch.randint(0, V, (5,))
    return x, w, y, b


def test_opcheck_ce_tvd():
    s, t, y = ce_tvd_inputs()
    torch.library.opcheck(ops.ce_tvd_reduced, (s, t, y, 0.5, 2.0, -100, True))
    torch.library.opcheck(ops.ce_tvd_forward, (s, t, y, -100))
    ce, tvd, state = ops.ce_tvd_forward(s.detach(), t, y, -100)
    torch.library.opcheck(ops.ce_tvd_backward,
                          (s.detach(), t, y, state, torch.rand(4),
                           torch.rand(4), -100))
    torch.library.opcheck(ops.ce_tvd_reduced_,
                          (s.detach().clone(), t, y, 1.0, 1.0, -100, False),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_opcheck_linear_ce(reduction):
    x, w, y, b = lce_inputs(bias=reduction != 2)
    cw = torch.rand(V) if reduction == 1 else None
    torch.library.opcheck(ops.linear_ce, (x, w, y, b, cw, None, -100, 1e-3,
                                          0.1, 0.0, reduction, 2, 0, False,
                                          0))


def test_fake_shapes():
    with FakeTensorMode():
        s = torch.empty(2, 3, 1000, dtype=torch.bfloat16, requires_grad=True)
        t = torch.empty(2, 3, 1000, dtype=torch.bfloat16)
        y = torch.zeros(2, 3, dtype=torch.int64)
        loss = fused_ce_tvd(s, t, y)
        assert loss.shape == () and loss.dtype == torch.float32
        ce, tvd = fused_ce_tvd(s, t, y, reduction="none")
        assert ce.shape == tvd.shape == (6,)
        x = torch.empty(6, 64, dtype=torch.bfloat16, requires_grad=True)
        w = torch.empty(1000, 64, dtype=torch.bfloat16, requires_grad=True)
        loss, zl = linear_cross_entropy(x, w, y, return_z_loss=True)
        assert loss.shape == zl.shape == ()
        rows = linear_cross_entropy(x, w, y, reduction="none")
        assert rows.shape == (6,)


def _compile_check(fn, *args):
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    got, want = compiled(*args), fn(*args)
    torch.testing.assert_close(got, want)
    return got


def test_compiled_backward_scales_like_eager():
    # Compiled, the saved gradient is scaled out of place; eager, in place.
    s, t, y = ce_tvd_inputs()
    x, w, y2, b = lce_inputs()

    def grads(fn):
        for leaf in (s, x, w, b):
            leaf.grad = None
        (fused_ce_tvd(s, t, y) * 0.3 +
         linear_cross_entropy(x, w, y2, b, reduction="sum") * -2.0).backward()
        return [leaf.grad.clone() for leaf in (s, x, w, b)]

    want = grads(None)
    torch._dynamo.reset()
    got = torch.compile(grads, backend="aot_eager")(None)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)


def test_compile_no_graph_break():
    s, t, y = ce_tvd_inputs()
    _compile_check(lambda a, b, c: fused_ce_tvd(a, b, c) * 2, s, t, y)
    _compile_check(lambda a, b, c: sum(fused_ce_tvd(a, b, c, reduction="none"))
                   .sum(), s, t, y)
    x, w, y2, b = lce_inputs()
    loss = _compile_check(lambda a, c, d, e: linear_cross_entropy(a, c, d, e),
                          x, w, y2, b)
    loss.backward()
    assert x.grad is not None and w.grad.shape == w.shape
    explained = torch._dynamo.explain(
        lambda a, c, d: linear_cross_entropy(a, c, d, reduction="none").sum())(
        x, w, y2)
    assert explained.graph_break_count == 0


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor on the CPU needs a C++ compiler")
def test_compile_inductor_cpu():
    s, t, y = ce_tvd_inputs()
    torch._dynamo.reset()
    f = torch.compile(lambda a, b, c: fused_ce_tvd(a, b, c) + 1,
                      fullgraph=True)
    torch.testing.assert_close(f(s, t, y), fused_ce_tvd(s, t, y) + 1)
