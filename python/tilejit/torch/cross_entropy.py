"""Cross-entropy over logits (docs/semantics.md §2 without the matmul) as a
PyTorch operator over the C ABI's tilejit_cross_entropy: three kernels,
lce_row_weights (the mean's denominators, and the bad-target flag, on the
device), cross_entropy (one program per row: its loss and gradient) and
lce_loss_sum (the reduced loss).

reduction "mean"/"sum": the forward computes the loss and its gradient;
backward scales the saved gradient by grad_output (in place, nothing to do
when it is 1). reduction "none": the forward saves the gradient of each
row's own loss, and backward multiplies row r by grad_output[r].
"""
import ctypes
from typing import Optional

import torch
from torch import Tensor

from .. import _capi
from . import _common as c

_REDUCTIONS = {"none": _capi.REDUCTION_NONE, "mean": _capi.REDUCTION_MEAN,
               "sum": _capi.REDUCTION_SUM}


def _grad_scale(logits, reduction):
    """What the gradient is stored times: BT for f16 with a reduced loss,
    whose gradient is that of a mean (entries p / BT) and may yet meet a
    GradScaler's factor: stored BT times larger, entries down to p = 6e-5
    keep f16's full precision (at the mean's scale only those down to
    6e-5 BT would); backward divides again. Else 1."""
    if logits.dtype == torch.float16 and reduction != _REDUCTIONS["none"]:
        return float(max(logits.size(0), 1))
    return 1.0


def _run(logits, grad, target, weight, ignore_index, label_smoothing,
         lse_square_scale, softcap, reduction):
    """(loss (2): the loss and its z-loss part, row_loss (BT), row_z_loss
    (BT), bad_target (1)), the gradient written to grad (times
    _grad_scale): one call of tilejit_cross_entropy
    (tilejit/ops/CrossEntropy.h)."""
    bt, v = logits.shape
    dev = logits.device
    f32 = dict(dtype=torch.float32, device=dev)
    row_loss = torch.empty(bt, **f32)
    row_z = torch.empty(bt, **f32)
    loss = torch.zeros(2, **f32)
    bad = torch.zeros(1, dtype=torch.int32, device=dev)
    # Positional, in the order of tilejit_cross_entropy_args.
    a = _capi.CrossEntropyArgs(
        c.DTYPES[logits.dtype], bt, v, logits.data_ptr(), grad.data_ptr(),
        target.data_ptr(), c.ptr(weight), None, ignore_index,
        label_smoothing, lse_square_scale, softcap, reduction,
        loss.data_ptr(), row_loss.data_ptr(), row_z.data_ptr(),
        bad.data_ptr(), _grad_scale(logits, reduction))
    lib = _capi.lib()
    n = ctypes.c_size_t()
    _capi.check(lib.tilejit_cross_entropy_workspace_bytes(ctypes.byref(a),
                                                          ctypes.byref(n)))
    ws = c.workspace(n.value, dev)
    if reduction != _REDUCTIONS["none"]:
        c.scale_kernel(dev, grad.dtype)  # for the backward
    c.call_on(logits, lambda device, stream: _capi.check(
        lib.tilejit_cross_entropy(ctypes.byref(a), ws.data_ptr(), n.value,
                                  device, stream)))
    return loss, row_loss, row_z, bad


def _cross_entropy(logits: Tensor, target: Tensor, weight: Optional[Tensor],
                   ignore_index: int, label_smoothing: float,
                   lse_square_scale: float, softcap: float, reduction: int
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(loss (2), row_loss (BT), row_z_loss (BT), d loss / d logits,
    bad_target (1)) of contiguous (BT, V) logits."""
    logits = logits.contiguous()
    grad = torch.empty_like(logits)
    loss, row_loss, row_z, bad = _run(
        logits, grad, target.contiguous(),
        None if weight is None else weight.contiguous(), ignore_index,
        label_smoothing, lse_square_scale, softcap, reduction)
    return loss, row_loss, row_z, grad, bad


def _fake(logits, target, weight, ignore_index, label_smoothing,
          lse_square_scale, softcap, reduction):
    bt = logits.size(0)
    f32 = torch.float32
    return (logits.new_empty((2,), dtype=f32),
            logits.new_empty((bt,), dtype=f32),
            logits.new_empty((bt,), dtype=f32),
            logits.new_empty(logits.shape),
            logits.new_empty((1,), dtype=torch.int32))


def _setup(ctx, inputs, output):
    ctx.none = inputs[-1] == _REDUCTIONS["none"]
    ctx.stored = _grad_scale(inputs[0], inputs[-1])
    ctx.save_for_backward(output[3])


def _upstream(ctx, grad_loss):
    """The factor the saved gradient still needs: grad_output over the
    scale it was stored at."""
    if grad_loss is None:
        return None
    g = grad_loss[0] if grad_loss.dim() else grad_loss
    return g / ctx.stored if ctx.stored != 1.0 else g


def _backward(ctx, grad_loss, grad_rows, *_ignored):
    (grad,) = ctx.saved_tensors
    if ctx.none:
        grad = c.scale_rows(ctx, grad, grad_rows)
    else:
        grad = c.scale_saved(ctx, grad, _upstream(ctx, grad_loss))
    return (grad,) + (None,) * 7


cross_entropy_op = c.Op("cross_entropy", _cross_entropy, _fake, _setup,
                        _backward)


def _cross_entropy_(logits: Tensor, target: Tensor, weight: Optional[Tensor],
                    ignore_index: int, label_smoothing: float,
                    lse_square_scale: float, softcap: float, reduction: int
                    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """_cross_entropy writing the gradient over contiguous logits: (loss,
    row_loss, row_z_loss, bad_target)."""
    if not logits.is_contiguous():
        raise ValueError("in place: the logits must be contiguous")
    return _run(logits, logits, target.contiguous(),
                None if weight is None else weight.contiguous(), ignore_index,
                label_smoothing, lse_square_scale, softcap, reduction)


def _inplace_fake(logits, target, weight, ignore_index, label_smoothing,
                  lse_square_scale, softcap, reduction):
    return _fake(logits, target, weight, ignore_index, label_smoothing,
                 lse_square_scale, softcap, reduction)[:3] + (
        logits.new_empty((1,), dtype=torch.int32),)


cross_entropy_inplace_op = c.Op("cross_entropy_", _cross_entropy_,
                                _inplace_fake, mutates=("logits",))


class _InPlace(torch.autograd.Function):
    """The reduced loss with its gradient written over the logits, whose
    values are gone after the call (Liger's in-place cross-entropy)."""

    @staticmethod
    def forward(ctx, logits, *args):
        loss, row_loss, row_z, bad = cross_entropy_inplace_op(logits, *args)
        ctx.stored = _grad_scale(logits, args[-1])
        ctx.save_for_backward(logits)
        ctx.mark_non_differentiable(row_loss, row_z, bad)
        ctx.eager = True  # scale_saved: in place
        return loss, row_loss, row_z, bad

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss, *_ignored):
        (grad,) = ctx.saved_tensors
        grad = c.scale_saved(ctx, grad, _upstream(ctx, grad_loss))
        # A new handle on the logits' memory: autograd keeps it as the
        # leaf's .grad instead of copying it.
        return (None if grad is None else grad.detach(),) + (None,) * 7


def cross_entropy(input, target, weight=None, *, ignore_index=-100,
                  reduction="mean", label_smoothing=0.0, lse_square_scale=0.0,
                  softcap=None, return_z_loss=False, in_place=False,
                  return_bad_target=False):
    """F.cross_entropy(softcap(input), target, weight=, ignore_index=,
    reduction=, label_smoothing=) plus lse_square_scale * lse^2 per valid
    row (Liger's z-loss, averaged over the valid rows for "mean"), its
    gradient computed with the loss.

    input (..., V) logits, bf16/f16/f32; target (...) class indices; weight
    (V,) any float dtype. Returns the f32 loss (a scalar, or (BT,) for
    "none"); with return_z_loss (loss, z_loss), z_loss for logging (no
    gradient). A target outside [0, V) that is not ignore_index counts as
    ignored (docs/semantics.md §5). in_place (mean/sum, contiguous input):
    the gradient is written over the logits, which are lost (eager mode).
    With return_bad_target, also the int32 (1,) flag: 0, or 1 + a row whose
    target is outside [0, V) and not ignore_index; the op never reads it on
    the host. f16 logits with mean or sum: the gradient is kept BT times
    larger until backward, so that a GradScaler's factor still finds the
    entries a mean makes small (those of p >= 6e-5 in full; PyTorch's
    backward, which applies the factor before rounding, keeps more)."""
    c.check_float("input", input)
    c.check_device(input)
    c.same_device(input=input, target=target, weight=weight)
    if input.dim() < 1 or input.size(-1) < 1:
        raise ValueError(f"input {tuple(input.shape)} must be (..., V), V >= 1")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', not "
                         f"{reduction!r}")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], not "
                         f"{label_smoothing}")
    if float(lse_square_scale) < 0:
        raise ValueError("lse_square_scale must be >= 0")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"softcap must be None or > 0, not {softcap}")
    v = input.size(-1)
    if weight is not None:
        c.check_float("weight", weight)
        if weight.shape != (v,):
            raise ValueError(f"weight {tuple(weight.shape)} must be (V,) = "
                             f"({v},)")
        weight = weight.detach().float()
    x = input if input.dim() == 2 else input.reshape(-1, v)
    tgt = c.as_target(target, x.size(0))
    args = (x, tgt, weight, int(ignore_index), float(label_smoothing),
            float(lse_square_scale), float(softcap or 0.0),
            _REDUCTIONS[reduction])
    if in_place:
        if reduction == "none":
            raise ValueError("in_place is for reduction 'mean' or 'sum'")
        c.refuse_traced_in_place()
        loss, row_loss, row_z, bad = _InPlace.apply(*args)
    else:
        loss, row_loss, row_z, _, bad = cross_entropy_op(*args)
    if reduction == "none":
        out, z = row_loss.reshape(target.shape), row_z.detach()
    else:
        out, z = loss[0], loss[1].detach()
    res = (out, z) if return_z_loss else out
    if return_bad_target:
        return (*res, bad) if return_z_loss else (res, bad)
    return res
