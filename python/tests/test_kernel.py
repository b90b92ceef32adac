"""tilejit.kernel on CPU tensors (the interpreter): the JSD spec against a
float64 torch JSD, argument checking, tuned configs without a GPU."""
import pytest
import torch

import tilejit

BT, V = 4, 300  # V: two full tiles of 128 and a partial one
SMALL = dict(BLOCK_SIZE=128, num_warps=4)
ONE = torch.ones(1)  # upstream: the gradient of the rows' sum


def jsd_reference(x, y, label, beta, ignore_index=-100):
    """Per-row generalized JSD of log-probabilities (docs/semantics.md §4)
    and the gradient of its sum with respect to x, in float64."""
    x = x.double().detach().requires_grad_()
    y = y.double()

    def kl(a, b):  # KL(exp(a) || exp(b)) per row
        return (a.exp() * (a - b)).sum(-1)

    if beta == 0:
        loss = kl(y, x)
    elif beta == 1:
        loss = kl(x, y)
    else:
        log_m = torch.log(beta * y.exp() + (1 - beta) * x.exp())
        loss = beta * kl(y, log_m) + (1 - beta) * kl(x, log_m)
    loss = loss * (label != ignore_index)
    loss.sum().backward()
    return loss.detach(), x.grad


def jsd_inputs(dtype=torch.float32):
    x = torch.log_softmax(torch.randn(BT, V) * 2, -1).to(dtype)
    y = torch.log_softmax(torch.randn(BT, V) * 2, -1).to(dtype)
    label = torch.randint(0, V, (BT,))
    label[1] = -100
    return x, y, label


@pytest.fixture(scope="module")
def jsd():
    return tilejit.kernel("jsd", torch.float32, **SMALL)


@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0])
def test_jsd_matches_torch(jsd, beta):
    x, y, label = jsd_inputs()
    loss, grad = torch.full((BT,), float("nan")), torch.empty(BT, V)
    jsd[(BT,)](x, y, label, loss, grad, ONE, beta, -100, 0, V)
    ref_loss, ref_grad = jsd_reference(x, y, label, beta)
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(grad.double(), ref_grad, rtol=1e-4, atol=1e-6)


def test_jsd_bf16_by_name_and_keywords():
    k = tilejit.kernel("jsd", "bf16", **SMALL)
    x, y, label = jsd_inputs(torch.bfloat16)
    loss, grad = torch.empty(BT), torch.empty(BT, V, dtype=torch.bfloat16)
    k[lambda meta: BT](x, y, label, loss, grad, ONE, beta=0.5,
                       ignore_index=-100, per_row_upstream=0, V=V)
    ref_loss, ref_grad = jsd_reference(x, y, label, 0.5)
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(grad.double(), ref_grad, rtol=2e-2, atol=1e-4)


def test_params_and_config(jsd):
    assert [(p.name, p.pointer, p.dtype) for p in jsd.params] == [
        ("student_logp", True, torch.float32),
        ("teacher_logp", True, torch.float32), ("label", True, torch.int64),
        ("loss", True, torch.float32), ("grad", True, torch.float32),
        ("upstream", True, torch.float32), ("beta", False, torch.float32),
        ("ignore_index", False, torch.int64),
        ("per_row_upstream", False, torch.int32),
        ("V", False, torch.int32)]
    assert jsd.name == "jsd" and jsd.config_source == "set"
    assert jsd.meta["BLOCK_SIZE"] == 128 and jsd.meta["num_warps"] == 4
    assert "BLOCK_SIZE=128" in jsd.config


def test_tuned_on_cpu_gives_defaults_and_says_why():
    shape = {"BT": 4096, "V": 151936}
    k = tilejit.kernel("jsd", torch.float32, tuned=True, shape=shape)
    assert k.config == tilejit.kernel("jsd", torch.float32, shape=shape).config
    assert k.config_source.startswith("default; ")
    assert "GPU" in k.config_source
    with pytest.raises(tilejit.TilejitError, match="shape 'BT'"):
        tilejit.kernel("jsd", torch.float32, tuned=True)
    with pytest.raises(ValueError, match="BLOCK_SIZE"):
        tilejit.kernel("jsd", torch.float32, tuned=True, BLOCK_SIZE=1024)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_tune_needs_a_gpu_and_a_run_declaration():
    with pytest.raises(tilejit.TilejitError, match="GPU"):
        tilejit.tune("jsd", "bf16", {"BT": 64, "V": 4096})
    with pytest.raises(tilejit.TilejitError, match="declares no arguments"):
        tilejit.tune("scale_grad", "bf16", {"n": 10})
    with pytest.raises(TypeError, match="size BT must be an int"):
        tilejit.tune("jsd", "bf16", {"BT": 64.0, "V": 4096})


def test_compile_errors():
    with pytest.raises(tilejit.TilejitError, match="unknown kernel 'nope'"):
        tilejit.kernel("nope", torch.float32)
    with pytest.raises(tilejit.TilejitError, match="no parameter 'FOO'"):
        tilejit.kernel("jsd", torch.float32, FOO=1)
    with pytest.raises(tilejit.TilejitError, match="does not support dtype"):
        tilejit.kernel("jsd", torch.int32)
    with pytest.raises(TypeError, match="BLOCK_SIZE must be an int"):
        tilejit.kernel("jsd", torch.float32, BLOCK_SIZE="big")


def test_argument_errors(jsd):
    x, y, label = jsd_inputs()
    loss, grad = torch.empty(BT), torch.empty(BT, V)
    run = jsd[BT]
    with pytest.raises(TypeError, match=r"takes 10 arguments \(student_logp,"):
        run(x, y, label)
    with pytest.raises(TypeError, match="missing V"):
        run(x, y, label, loss, grad, ONE, 0.5, -100, 0)
    with pytest.raises(TypeError, match="no parameter 'W'"):
        run(x, y, label, loss, grad, ONE, 0.5, -100, 0, W=V)
    with pytest.raises(TypeError, match="'label' .*pointer to i64.*int32"):
        run(x, y, label.int(), loss, grad, ONE, 0.5, -100, 0, V)
    with pytest.raises(TypeError, match="'grad' .*must be a torch.Tensor"):
        run(x, y, label, loss, 1.0, ONE, 0.5, -100, 0, V)
    with pytest.raises(TypeError, match=r"'V' \(i32\) must be an int, not "
                                        "float"):
        run(x, y, label, loss, grad, ONE, 0.5, -100, 0, float(V))
    with pytest.raises(TypeError, match=r"'beta' \(f32\) is a scalar"):
        run(x, y, label, loss, grad, ONE, torch.tensor(0.5), -100, 0, V)
    with pytest.raises(ValueError, match="'V' .*outside"):
        run(x, y, label, loss, grad, ONE, 0.5, -100, 0, 2**31)
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        jsd[1, 1, 1, 1](x, y, label, loss, grad, ONE, 0.5, -100, 0, V)
    with pytest.raises(ValueError, match="negative grid"):
        jsd[-1](x, y, label, loss, grad, ONE, 0.5, -100, 0, V)


def test_interpreter_bounds_each_tensor(jsd):
    # V + 1 reads past the end of x: the interpreter bounds every access by
    # the elements its tensor's storage holds.
    x, y, label = jsd_inputs()
    loss, grad = torch.empty(BT), torch.empty(BT, V)
    with pytest.raises(tilejit.TilejitError, match="out-of-bounds"):
        jsd[BT](x, y, label, loss, grad, ONE, 0.5, -100, 0, V + 1)
