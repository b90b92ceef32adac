"""The generalized Jensen-Shannon divergence of Liger-Kernel's LigerJSD
(docs/semantics.md §4) as a PyTorch operator, over the registered kernel
jsd: one program per row gives the row's divergence and the gradient of the
rows' sum with respect to the student's log-probabilities.

reduction "batchmean": the sum over the rows not ignored, divided by their
number (all rows without a target; LigerJSD's convention); "sum"; "none":
per row. The backward scales the saved gradient by grad_output (and the
mean's 1 / n) on the device: in place for the scalar reductions, row by row
for "none". The teacher gets no gradient.
"""
from typing import Optional

import torch
from torch import Tensor

from . import _common as c
from .kl_div import _Reduced, _count, _REDUCTIONS


def _jsd(student: Tensor, teacher: Tensor, target: Optional[Tensor],
         beta: float, ignore_index: int) -> tuple[Tensor, Tensor]:
    """(per-row divergence (BT,) f32, d sum / d student) of contiguous
    (BT, V) log-probabilities; rows whose target is ignore_index give 0."""
    student, teacher = student.contiguous(), teacher.contiguous()
    bt, v = student.shape
    dev = student.device
    loss = torch.empty(bt, dtype=torch.float32, device=dev)
    grad = torch.empty_like(student)
    labels = target.contiguous() if target is not None else \
        torch.empty(1, dtype=torch.int64, device=dev)  # not read
    if bt:
        k = c.kernel_on(dev, "jsd", student.dtype,
                        HAS_LABEL=int(target is not None))
        c.launch(k, bt, [c.tensor_arg(student), c.tensor_arg(teacher),
                         c.tensor_arg(labels), c.tensor_arg(loss),
                         c.tensor_arg(grad), c.f32_arg(beta),
                         c.i64_arg(ignore_index), c.i32_arg(v)], student)
    return loss, grad


def _fake(student, teacher, target, beta, ignore_index):
    return (student.new_empty((student.size(0),), dtype=torch.float32),
            student.new_empty(student.shape))


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _backward(ctx, grad_rows, _grad_grad):
    (grad,) = ctx.saved_tensors
    return (c.scale_rows(ctx, grad, grad_rows),) + (None,) * 4


jsd_op = c.Op("jsd", _jsd, _fake, _setup, _backward)


def jsd(student_logp, teacher_logp, target=None, *, beta=0.5,
        ignore_index=-100, reduction="batchmean"):
    """beta KL(p || m) + (1 - beta) KL(q || m), m = beta p + (1 - beta) q,
    of the student's log-probabilities log q and the teacher's log p per
    row, as LigerJSD (beta 0: the forward KL, 1: the reverse).

    student_logp, teacher_logp: (..., V), bf16/f16/f32, alike; target (...)
    optional: rows whose target is ignore_index are left out and not
    counted by "batchmean". Returns an f32 scalar, or (...,) for "none".
    Only the student gets a gradient."""
    c.check_float("student_logp", student_logp)
    c.check_float("teacher_logp", teacher_logp)
    c.check_device(student_logp)
    c.same_device(student_logp=student_logp, teacher_logp=teacher_logp,
                  target=target)
    s, t = student_logp, teacher_logp
    if s.dim() < 1 or s.shape != t.shape or s.size(-1) < 1:
        raise ValueError(f"student_logp {tuple(s.shape)} and teacher_logp "
                         f"{tuple(t.shape)} must be (..., V), alike, V >= 1")
    if s.dtype != t.dtype:
        raise TypeError(f"student_logp is {s.dtype}, teacher_logp {t.dtype}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'batchmean', 'sum' or 'none', "
                         f"not {reduction!r}")
    if not 0.0 <= float(beta) <= 1.0:
        raise ValueError(f"beta must be in [0, 1], not {beta}")
    v = s.size(-1)
    s2 = s if s.dim() == 2 else s.reshape(-1, v)
    t2 = (t if t.dim() == 2 else t.reshape(-1, v)).detach()
    tgt = None if target is None else c.as_target(target, s2.size(0))
    args = (float(beta), int(ignore_index))
    if reduction == "none" or c._traced():
        rows = jsd_op(s2, t2, tgt, *args)[0]
        if reduction == "none":
            return rows.reshape(s.shape[:-1])
        total = rows.sum()
        return total if reduction == "sum" else \
            total / _count(tgt, s2, ignore_index)
    scale = torch.ones((), device=s2.device) if reduction == "sum" else \
        1.0 / _count(tgt, s2, ignore_index)
    if not c.needs_grad(s2):
        return jsd_op.impl(s2, t2, tgt, *args)[0].sum() * scale
    return _Reduced.apply(jsd_op.impl, s2, t2, tgt, scale, *args)
