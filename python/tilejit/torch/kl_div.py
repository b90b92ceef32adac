"""KL-divergence distillation on raw logits as a PyTorch operator over the
C ABI's tilejit_distillation (tilejit/ops/Distillation.h; the kernel
kl_div, kernels_spec/KlDiv.cpp, has the math): the loss, each row's
divergence and the gradient with respect to the student's logits in one
call.

reduction "batchmean": the sum over the rows not ignored, divided by their
number (all rows without a target); "sum": the sum; "none": per row. The
backward scales the saved gradient by grad_output on the device (_rows).
"""
from typing import Optional

from torch import Tensor

from .. import _capi
from . import _common as c
from . import _rows as rows


def _kl_div(student: Tensor, teacher: Tensor, target: Optional[Tensor],
            temperature: float, reverse: bool, ignore_index: int,
            reduction: int) -> tuple[Tensor, Tensor, Tensor]:
    """(loss (1,), per-row divergence (BT,) f32, d loss / d student) of
    (BT, V) logits."""
    divergence = _capi.KL_REVERSE if reverse else _capi.KL_FORWARD
    return rows.run(divergence, student, teacher, target, temperature, 0.5,
                    ignore_index, reduction)


kl_div_op = c.Op("kl_div", _kl_div, rows.fake, rows.setup, rows.backward)


def kl_div(student, teacher, target=None, *, temperature=1.0, reverse=False,
           ignore_index=-100, reduction="batchmean", in_place=False):
    """KL(softmax(teacher / T) || softmax(student / T)) per row (reverse:
    KL(softmax(student / T) || softmax(teacher / T))), as F.kl_div on
    log-softmaxed logits with log_target=True; Hinton's T^2 factor is the
    caller's to apply.

    student, teacher: (..., V) logits, bf16/f16/f32, alike; target (...)
    optional: rows whose target is ignore_index are left out (loss 0,
    gradient 0) and not counted by "batchmean", which averages over every
    leading position (all rows of BT = prod(...), as Liger does; F.kl_div
    divides by input.size(0)). Returns an f32 scalar, or (...,) for
    "none". Only the student gets a gradient. in_place ("batchmean" or
    "sum", contiguous student, eager mode): the gradient is written over
    the student's logits, which are lost."""
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, not {temperature}")
    divergence = _capi.KL_REVERSE if reverse else _capi.KL_FORWARD
    return rows.distill(kl_div_op, student, teacher, target,
                        ("student", "teacher"), reduction, float(temperature),
                        bool(reverse), int(ignore_index),
                        in_place=(divergence, float(temperature), 0.5,
                                  int(ignore_index)) if in_place else None)
