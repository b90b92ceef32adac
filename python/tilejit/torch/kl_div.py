"""KL-divergence distillation on raw logits as a PyTorch operator, over the
registered kernel kl_div (kernels_spec/KlDiv.cpp has the math): one
program per row gives the row's divergence and the gradient of the rows'
sum with respect to the student's logits.

reduction "batchmean": the sum over the rows not ignored, divided by their
number (all rows without a target); "sum": the sum; "none": per row. The
backward scales the saved gradient by grad_output (and the mean's 1 / n)
on the device: in place for the scalar reductions, row by row for "none".
The teacher gets no gradient.
"""
from typing import Optional

import torch
from torch import Tensor

from . import _common as c

_REDUCTIONS = {"none": 0, "batchmean": 1, "sum": 2}


def _kl_div(student: Tensor, teacher: Tensor, target: Optional[Tensor],
            temperature: float, reverse: bool, ignore_index: int
            ) -> tuple[Tensor, Tensor]:
    """(per-row divergence (BT,) f32, d sum / d student) of contiguous
    (BT, V) logits; rows whose target is ignore_index give 0."""
    student, teacher = student.contiguous(), teacher.contiguous()
    bt, v = student.shape
    dev = student.device
    loss = torch.empty(bt, dtype=torch.float32, device=dev)
    grad = torch.empty_like(student)
    labels = target.contiguous() if target is not None else \
        torch.empty(1, dtype=torch.int64, device=dev)  # not read
    if bt:
        k = c.kernel_on(dev, "kl_div", student.dtype,
                        HAS_LABEL=int(target is not None))
        c.launch(k, bt, [c.tensor_arg(student), c.tensor_arg(teacher),
                         c.tensor_arg(labels), c.tensor_arg(loss),
                         c.tensor_arg(grad), c.f32_arg(temperature),
                         c.i32_arg(reverse), c.i64_arg(ignore_index),
                         c.i32_arg(v)], student)
    return loss, grad


def _fake(student, teacher, target, temperature, reverse, ignore_index):
    return (student.new_empty((student.size(0),), dtype=torch.float32),
            student.new_empty(student.shape))


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _backward(ctx, grad_rows, _grad_grad):
    (grad,) = ctx.saved_tensors
    return (c.scale_rows(ctx, grad, grad_rows),) + (None,) * 5


kl_div_op = c.Op("kl_div", _kl_div, _fake, _setup, _backward)


class _Reduced(torch.autograd.Function):
    """The rows' sum times `scale` (a device scalar: 1, or 1 / n_valid)
    for impl(student, teacher, target, *args) -> (rows, d sum / d
    student); the gradient scaled in backward in place."""

    @staticmethod
    def forward(ctx, impl, student, teacher, target, scale, *args):
        rows, grad = impl(student, teacher, target, *args)
        c.scale_kernel(grad.device, grad.dtype)  # for the backward
        ctx.save_for_backward(grad, scale)
        ctx.eager = not torch.compiler.is_compiling()  # scale_saved
        ctx.extra = len(args)
        return (rows.sum() * scale).reshape(())

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        grad, scale = ctx.saved_tensors
        return (None, c.scale_saved(ctx, grad, grad_loss * scale)) + \
            (None,) * (3 + ctx.extra)


def kl_div(student, teacher, target=None, *, temperature=1.0, reverse=False,
           ignore_index=-100, reduction="batchmean"):
    """KL(softmax(teacher / T) || softmax(student / T)) per row (reverse:
    KL(softmax(student / T) || softmax(teacher / T))), as F.kl_div on
    log-softmaxed logits with log_target=True; Hinton's T^2 factor is the
    caller's to apply.

    student, teacher: (..., V) logits, bf16/f16/f32, alike; target (...)
    optional: rows whose target is ignore_index are left out (loss 0,
    gradient 0) and not counted by "batchmean". Returns an f32 scalar, or
    (...,) for "none". Only the student gets a gradient."""
    c.check_float("student", student)
    c.check_float("teacher", teacher)
    c.check_device(student)
    c.same_device(student=student, teacher=teacher, target=target)
    if student.dim() < 1 or student.shape != teacher.shape or \
            student.size(-1) < 1:
        raise ValueError(f"student {tuple(student.shape)} and teacher "
                         f"{tuple(teacher.shape)} must be (..., V), alike, "
                         "V >= 1")
    if student.dtype != teacher.dtype:
        raise TypeError(f"student is {student.dtype}, teacher {teacher.dtype}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'batchmean', 'sum' or 'none', "
                         f"not {reduction!r}")
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, not {temperature}")
    v = student.size(-1)
    s2 = student if student.dim() == 2 else student.reshape(-1, v)
    t2 = (teacher if teacher.dim() == 2 else teacher.reshape(-1, v)).detach()
    tgt = None if target is None else c.as_target(target, s2.size(0))
    args = (float(temperature), bool(reverse), int(ignore_index))
    if reduction == "none" or c._traced():
        rows = kl_div_op(s2, t2, tgt, *args)[0]
        if reduction == "none":
            return rows.reshape(student.shape[:-1])
        total = rows.sum()
        return total if reduction == "sum" else \
            total / _count(tgt, s2, ignore_index)
    scale = torch.ones((), device=s2.device) if reduction == "sum" else \
        1.0 / _count(tgt, s2, ignore_index)
    if not c.needs_grad(s2):
        return kl_div_op.impl(s2, t2, tgt, *args)[0].sum() * scale
    return _Reduced.apply(kl_div_op.impl, s2, t2, tgt, scale, *args)


def _count(target, s2, ignore_index):
    """The rows not ignored, at least 1, as an f32 device scalar."""
    if target is None:
        return torch.full((), max(s2.size(0), 1), dtype=torch.float32,
                          device=s2.device)
    return (target != ignore_index).sum().clamp(min=1).to(torch.float32)
