"""What the distillation losses (kl_div, jsd) share: one call of the C ABI's
tilejit_distillation (tilejit/ops/Distillation.h) gives each row's loss,
the reduced loss ("batchmean" over the rows not ignored, or "sum") and the
student's gradient, all on the device.

"batchmean"/"sum": backward scales the saved gradient by grad_output (in
place, nothing to do when it is 1). "none": the forward saves the gradient
of each row's own loss, and backward multiplies row r by grad_output[r].
The teacher gets no gradient."""
import ctypes
from typing import Optional

import torch
from torch import Tensor

from .. import _capi
from . import _common as c

REDUCTIONS = {"none": _capi.REDUCTION_NONE, "batchmean": _capi.REDUCTION_MEAN,
              "sum": _capi.REDUCTION_SUM}


def run(divergence: int, student: Tensor, teacher: Tensor,
        target: Optional[Tensor], temperature: float, beta: float,
        ignore_index: int, reduction: int, in_place: bool = False
        ) -> tuple[Tensor, Tensor, Tensor]:
    """(loss (1,) f32: 0 for "none", per-row (BT,) f32, d loss / d student)
    of (BT, V) rows: one call of tilejit_distillation. in_place: the
    gradient is written over the (contiguous) student and returned as it."""
    if not in_place:
        student = student.contiguous()
    teacher = teacher.contiguous()
    bt, v = student.shape
    dev = student.device
    f32 = dict(dtype=torch.float32, device=dev)
    rows = torch.empty(bt, **f32)
    loss = torch.zeros(1, **f32)
    grad = student if in_place else torch.empty_like(student)
    target = None if target is None else target.contiguous()
    # Positional, in the order of tilejit_distillation_args.
    a = _capi.DistillationArgs(
        divergence, c.DTYPES[student.dtype], bt, v, student.data_ptr(),
        teacher.data_ptr(), grad.data_ptr(), c.ptr(target), ignore_index,
        temperature, beta, reduction, None, loss.data_ptr(), rows.data_ptr())
    lib = _capi.lib()
    n = ctypes.c_size_t()
    _capi.check(lib.tilejit_distillation_workspace_bytes(ctypes.byref(a),
                                                         ctypes.byref(n)))
    ws = c.workspace(n.value, dev)
    if reduction != _capi.REDUCTION_NONE:
        c.scale_kernel(dev, grad.dtype)  # for the backward
    c.call_on(student, lambda device, stream: _capi.check(
        lib.tilejit_distillation(ctypes.byref(a), ws.data_ptr(), n.value,
                                 device, stream)))
    return loss, rows, grad


def fake(student, teacher, target, *scalars):
    bt = student.size(0)
    return (student.new_empty((1,), dtype=torch.float32),
            student.new_empty((bt,), dtype=torch.float32),
            student.new_empty(student.shape))


def setup(ctx, inputs, output):
    ctx.inputs = len(inputs)
    ctx.none = inputs[-1] == _capi.REDUCTION_NONE
    ctx.save_for_backward(output[2])


def backward(ctx, grad_loss, grad_rows, _grad_grad):
    (grad,) = ctx.saved_tensors
    if ctx.none:
        grad = c.scale_rows(ctx, grad, grad_rows)
    else:
        grad = c.scale_saved(ctx, grad, grad_loss)
    return (grad,) + (None,) * (ctx.inputs - 1)


def _distill_(student: Tensor, teacher: Tensor, target: Optional[Tensor],
              divergence: int, temperature: float, beta: float,
              ignore_index: int, reduction: int) -> tuple[Tensor, Tensor]:
    """(loss (1,), per-row (BT,)) with d loss / d student written over the
    contiguous student."""
    loss, rows, _ = run(divergence, student, teacher, target, temperature,
                        beta, ignore_index, reduction, in_place=True)
    return loss, rows


def _inplace_fake(student, teacher, target, *scalars):
    return fake(student, teacher, target)[:2]


distill_inplace_op = c.Op("distillation_", _distill_, _inplace_fake,
                          mutates=("student",))


class _InPlace(torch.autograd.Function):
    """The reduced loss with its gradient written over the student, whose
    values are gone after the call (as Liger's in-place cross-entropy)."""

    @staticmethod
    def forward(ctx, student, *args):
        loss, rows = distill_inplace_op(student, *args)
        ctx.save_for_backward(student)
        ctx.mark_non_differentiable(rows)
        ctx.eager = True  # scale_saved: in place
        return loss, rows

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss, _grad_rows):
        (grad,) = ctx.saved_tensors
        grad = c.scale_saved(ctx, grad, grad_loss)
        # A new handle on the student's memory: autograd keeps it as the
        # leaf's .grad instead of copying it.
        return (None if grad is None else grad.detach(),) + (None,) * 7


def distill(op, student, teacher, target, names, reduction, *args,
            in_place=None):
    """op (a _common.Op over (student, teacher, target, *args, reduction))
    on (..., V) rows after the checks both losses make: an f32 scalar, or
    the leading shape for "none". in_place: (divergence, temperature,
    beta, ignore_index) for the gradient written over the student (mean or
    sum, contiguous student, eager mode), or None."""
    sn, tn = names
    c.check_float(sn, student)
    c.check_float(tn, teacher)
    c.check_device(student)
    c.same_device(**{sn: student, tn: teacher, "target": target})
    if student.dim() < 1 or student.shape != teacher.shape or \
            student.size(-1) < 1:
        raise ValueError(f"{sn} {tuple(student.shape)} and {tn} "
                         f"{tuple(teacher.shape)} must be (..., V), alike, "
                         "V >= 1")
    if student.dtype != teacher.dtype:
        raise TypeError(f"{sn} is {student.dtype}, {tn} {teacher.dtype}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be 'batchmean', 'sum' or 'none', "
                         f"not {reduction!r}")
    v = student.size(-1)
    s2 = student if student.dim() == 2 else student.reshape(-1, v)
    t2 = (teacher if teacher.dim() == 2 else teacher.reshape(-1, v)).detach()
    tgt = None if target is None else c.as_target(target, s2.size(0))
    if in_place is not None:
        if reduction == "none":
            raise ValueError("in_place is for reduction 'batchmean' or 'sum'")
        if not student.is_contiguous():
            raise ValueError(f"in place: {sn} must be contiguous")
        c.refuse_traced_in_place()
        loss, rows = _InPlace.apply(s2, t2, tgt, *in_place,
                                    REDUCTIONS[reduction])
        return loss[0]
    loss, rows, _ = op(s2, t2, tgt, *args, REDUCTIONS[reduction])
    if reduction == "none":
        return rows.reshape(student.shape[:-1])
    return loss[0]
