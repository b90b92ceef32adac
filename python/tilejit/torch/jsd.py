"""The generalized Jensen-Shannon divergence of Liger-Kernel's LigerJSD
(docs/semantics.md §4) as a PyTorch operator, over the registered kernel
jsd: one program per row gives the row's divergence and the gradient of the
rows' sum with respect to the student's log-probabilities.

reduction "batchmean": the sum over the rows not ignored, divided by their
number (all rows without a target; LigerJSD's convention); "sum"; "none":
per row. The kernel writes the gradient times the mean's 1 / n (a device
scalar); the backward scales it by grad_output on the device: in place for
the scalar reductions (nothing to do when grad_output is 1), row by row for
"none". The teacher gets no gradient.
"""
from typing import Optional

import torch
from torch import Tensor

from . import _common as c
from . import _rows as rows


def _scaled(student, teacher, target, scale, beta, ignore_index):
    """(per-row divergence (BT,) f32, d sum / d student times scale) of
    contiguous (BT, V) log-probabilities; rows whose target is
    ignore_index give 0."""
    return rows.run("jsd", student, teacher, target, scale,
                    [c.f32_arg(beta), c.i64_arg(ignore_index),
                     c.i32_arg(student.size(1))])


def _jsd(student: Tensor, teacher: Tensor, target: Optional[Tensor],
         beta: float, ignore_index: int) -> tuple[Tensor, Tensor]:
    """(per-row divergence (BT,) f32, d sum / d student)."""
    return _scaled(student, teacher, target, None, beta, ignore_index)


jsd_op = c.Op("jsd", _jsd, rows.fake, rows.setup, rows.backward)


def jsd(student_logp, teacher_logp, target=None, *, beta=0.5,
        ignore_index=-100, reduction="batchmean"):
    """beta KL(p || m) + (1 - beta) KL(q || m), m = beta p + (1 - beta) q,
    of the student's log-probabilities log q and the teacher's log p per
    row, as LigerJSD (beta 0: the forward KL, 1: the reverse).

    student_logp, teacher_logp: (..., V), bf16/f16/f32, alike; target (...)
    optional: rows whose target is ignore_index are left out and not
    counted by "batchmean". Returns an f32 scalar, or (...,) for "none".
    Only the student gets a gradient."""
    if not 0.0 <= float(beta) <= 1.0:
        raise ValueError(f"beta must be in [0, 1], not {beta}")
    s2, t2, tgt = rows.flatten(student_logp, teacher_logp, target,
                               ("student_logp", "teacher_logp"), reduction)
    return rows.reduce(jsd_op, _scaled, student_logp.shape[:-1], s2, t2,
                       tgt, (float(beta), int(ignore_index)), reduction,
                       ignore_index)
