"""The generalized Jensen-Shannon divergence of Liger-Kernel's LigerJSD
(docs/semantics.md §4) as a PyTorch operator over the C ABI's
tilejit_distillation (tilejit/ops/Distillation.h; the kernel jsd): the
loss, each row's divergence and the gradient with respect to the student's
log-probabilities in one call.

reduction "batchmean": the sum over the rows not ignored, divided by their
number (all rows without a target; LigerJSD's convention); "sum"; "none":
per row. The backward scales the saved gradient by grad_output on the
device (_rows).
"""
from typing import Optional

from torch import Tensor

from .. import _capi
from . import _common as c
from . import _rows as rows


def _jsd(student: Tensor, teacher: Tensor, target: Optional[Tensor],
         beta: float, ignore_index: int, reduction: int
         ) -> tuple[Tensor, Tensor, Tensor]:
    """(loss (1,), per-row divergence (BT,) f32, d loss / d student) of
    (BT, V) log-probabilities."""
    return rows.run(_capi.JSD, student, teacher, target, 1.0, beta,
                    ignore_index, reduction)


jsd_op = c.Op("jsd", _jsd, rows.fake, rows.setup, rows.backward)


def jsd(student_logp, teacher_logp, target=None, *, beta=0.5,
        ignore_index=-100, reduction="batchmean", in_place=False):
    """beta KL(p || m) + (1 - beta) KL(q || m), m = beta p + (1 - beta) q,
    of the student's log-probabilities log q and the teacher's log p per
    row, as LigerJSD (beta 0: the forward KL, 1: the reverse).

    student_logp, teacher_logp: (..., V), bf16/f16/f32, alike; target (...)
    optional: rows whose target is ignore_index are left out and not
    counted by "batchmean". Returns an f32 scalar, or (...,) for "none".
    Only the student gets a gradient. in_place ("batchmean" or "sum",
    contiguous student, eager mode): the gradient is written over the
    student's log-probabilities, which are lost."""
    if not 0.0 <= float(beta) <= 1.0:
        raise ValueError(f"beta must be in [0, 1], not {beta}")
    return rows.distill(jsd_op, student_logp, teacher_logp, target,
                        ("student_logp", "teacher_logp"), reduction,
                        float(beta), int(ignore_index),
                        in_place=(_capi.JSD, 1.0, float(beta),
                                  int(ignore_index)) if in_place else None)


def _jsd_logits(student: Tensor, teacher: Tensor, target: Optional[Tensor],
                beta: float, temperature: float, ignore_index: int,
                reduction: int) -> tuple[Tensor, Tensor, Tensor]:
    """(loss (1,), per-row divergence (BT,) f32, d loss / d student) of
    (BT, V) logits."""
    return rows.run(_capi.JSD_LOGITS, student, teacher, target, temperature,
                    beta, ignore_index, reduction)


jsd_logits_op = c.Op("jsd_logits", _jsd_logits, rows.fake, rows.setup,
                     rows.backward)


def jsd_logits(student, teacher, target=None, *, beta=0.5, temperature=1.0,
               ignore_index=-100, reduction="batchmean", in_place=False):
    """jsd of log_softmax(student / T) and log_softmax(teacher / T): the
    loss of LigerFusedLinearJSD past its matmul, on logits, with the
    gradient with respect to the student's logits. Hinton's T^2 factor is
    the caller's.

    student, teacher: (..., V) logits, bf16/f16/f32, alike; target, beta,
    ignore_index, reduction and in_place as in jsd."""
    if not 0.0 <= float(beta) <= 1.0:
        raise ValueError(f"beta must be in [0, 1], not {beta}")
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, not {temperature}")
    return rows.distill(jsd_logits_op, student, teacher, target,
                        ("student", "teacher"), reduction, float(beta),
                        float(temperature), int(ignore_index),
                        in_place=(_capi.JSD_LOGITS, float(temperature),
                                  float(beta), int(ignore_index))
                        if in_place else None)
