"""KL-divergence distillation on raw logits as a PyTorch operator, over the
registered kernel kl_div (kernels_spec/KlDiv.cpp has the math): one
program per row gives the row's divergence and the gradient of the rows'
sum with respect to the student's logits.

reduction "batchmean": the sum over the rows not ignored, divided by their
number (all rows without a target); "sum": the sum; "none": per row. The
kernel writes the gradient times the mean's 1 / n (a device scalar); the
backward scales it by grad_output on the device: in place for the scalar
reductions (nothing to do when grad_output is 1), row by row for "none".
The teacher gets no gradient.
"""
from typing import Optional

import torch
from torch import Tensor

from . import _common as c
from . import _rows as rows


def _scaled(student, teacher, target, scale, temperature, reverse,
            ignore_index):
    """(per-row divergence (BT,) f32, d sum / d student times scale) of
    contiguous (BT, V) logits; rows whose target is ignore_index give 0."""
    return rows.run("kl_div", student, teacher, target, scale,
                    [c.f32_arg(temperature), c.i32_arg(reverse),
                     c.i64_arg(ignore_index), c.i32_arg(student.size(1))])


def _kl_div(student: Tensor, teacher: Tensor, target: Optional[Tensor],
            temperature: float, reverse: bool, ignore_index: int
            ) -> tuple[Tensor, Tensor]:
    """(per-row divergence (BT,) f32, d sum / d student)."""
    return _scaled(student, teacher, target, None, temperature, reverse,
                   ignore_index)


kl_div_op = c.Op("kl_div", _kl_div, rows.fake, rows.setup, rows.backward)


def kl_div(student, teacher, target=None, *, temperature=1.0, reverse=False,
           ignore_index=-100, reduction="batchmean"):
    """KL(softmax(teacher / T) || softmax(student / T)) per row (reverse:
    KL(softmax(student / T) || softmax(teacher / T))), as F.kl_div on
    log-softmaxed logits with log_target=True; Hinton's T^2 factor is the
    caller's to apply.

    student, teacher: (..., V) logits, bf16/f16/f32, alike; target (...)
    optional: rows whose target is ignore_index are left out (loss 0,
    gradient 0) and not counted by "batchmean", which averages over every
    leading position (all rows of BT = prod(...), as Liger does; F.kl_div
    divides by input.size(0)). Returns an f32 scalar, or (...,) for
    "none". Only the student gets a gradient."""
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, not {temperature}")
    s2, t2, tgt = rows.flatten(student, teacher, target,
                               ("student", "teacher"), reduction)
    return rows.reduce(kl_div_op, _scaled, student.shape[:-1], s2, t2,
                       tgt, (float(temperature), bool(reverse),
                             int(ignore_index)), reduction, ignore_index)
