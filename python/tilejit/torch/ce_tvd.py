"""The fused CE+TVD loss (docs/semantics.md §1) as PyTorch operators.

reduction "mean"/"sum": tilejit::ce_tvd_reduced computes the loss and its
gradient with respect to the student in one call; backward scales the saved
gradient by grad_output in place (scale_grad: on the device, and no work
when grad_output is 1, as after loss.backward()). reduction "none": tilejit::ce_tvd_forward gives
per-row ce and tvd, tilejit::ce_tvd_backward their gradient. The teacher
gets no gradient.
"""
import ctypes

import torch
from torch import Tensor

from .. import _capi
from . import _common as c

_lib = _capi.lib


def _state_bytes(bt):
    # tilejit_ce_tvd_state_bytes(bt), written out so fake tensors can use it.
    return 6 * ((bt * 4 + 15) // 16 * 16) + 16


def _bad_offset(bt):
    return 6 * ((bt * 4 + 15) // 16 * 16)


def _rows(student, teacher):
    """(student, teacher) with unit column stride and one row stride."""
    student = c.row_major(student)
    teacher = c.row_major(teacher)
    if student.size(0) > 1 and teacher.stride(0) != student.stride(0):
        laid = torch.empty_strided(teacher.shape, student.stride(),
                                   dtype=teacher.dtype, device=teacher.device)
        teacher = laid.copy_(teacher)
    return student, teacher


def _reduced_args(student, teacher, target, grad, loss, bad, alpha, beta,
                  ignore_index, mean):
    bt, v = student.shape
    # Positional, in the order of tilejit_ce_tvd_reduced_args.
    return _capi.CeTvdReducedArgs(
        c.DTYPES[student.dtype], bt, v, student.data_ptr(), teacher.data_ptr(),
        c.row_stride(student), 0, target.data_ptr(), grad.data_ptr(),
        c.row_stride(grad), loss.data_ptr(), None, None, bad.data_ptr(),
        ignore_index, alpha, beta, int(mean), None, 0)


def _run_reduced(student, teacher, target, grad, alpha, beta, ignore_index,
                 mean):
    loss = torch.empty((), dtype=torch.float32, device=student.device)
    bad = torch.empty(1, dtype=torch.int32, device=student.device)
    a = _reduced_args(student, teacher, target, grad, loss, bad, alpha, beta,
                      ignore_index, mean)
    lib = _lib()
    n = ctypes.c_size_t()
    _capi.check(lib.tilejit_ce_tvd_reduced_workspace_bytes(ctypes.byref(a),
                                                           ctypes.byref(n)))
    ws = c.workspace(n.value, student.device)
    c.scale_kernel(student.device, student.dtype)  # for the backward
    c.call_on(student, lambda device, stream: _capi.check(
        lib.tilejit_ce_tvd_reduced(ctypes.byref(a), ws.data_ptr(), n.value,
                                   device, stream)))
    return loss, bad


def _ce_tvd_reduced(student: Tensor, teacher: Tensor, target: Tensor,
                    alpha: float, beta: float, ignore_index: int,
                    mean: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(loss, d loss / d student, bad_target) of (BT, V) logits."""
    student, teacher = _rows(student, teacher)
    grad = torch.empty(student.shape, dtype=student.dtype,
                       device=student.device)
    loss, bad = _run_reduced(student, teacher, target.contiguous(), grad,
                             alpha, beta, ignore_index, mean)
    return loss, grad, bad


def _reduced_fake(student, teacher, target, alpha, beta, ignore_index, mean):
    return (student.new_empty((), dtype=torch.float32),
            student.new_empty(student.shape),
            student.new_empty((1,), dtype=torch.int32))


def _reduced_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _reduced_backward(ctx, grad_loss, _grad_grad, _grad_bad):
    (grad,) = ctx.saved_tensors
    grad = c.scale_saved(ctx, grad, grad_loss)
    return grad, None, None, None, None, None, None


ce_tvd_reduced = c.Op("ce_tvd_reduced", _ce_tvd_reduced, _reduced_fake,
                      _reduced_setup, _reduced_backward)


def _ce_tvd_reduced_(student: Tensor, teacher: Tensor, target: Tensor,
                     alpha: float, beta: float, ignore_index: int,
                     mean: bool) -> tuple[Tensor, Tensor]:
    """ce_tvd_reduced writing the gradient over student (unit column
    stride): (loss, bad_target)."""
    if student.stride(1) != 1 and student.size(1) > 1:
        raise ValueError("in place: the student needs unit column stride")
    _, teacher = _rows(student, teacher)
    return _run_reduced(student, teacher, target.contiguous(), student,
                        alpha, beta, ignore_index, mean)


def _reduced_inplace_fake(student, teacher, target, alpha, beta,
                          ignore_index, mean):
    return (student.new_empty((), dtype=torch.float32),
            student.new_empty((1,), dtype=torch.int32))


ce_tvd_reduced_ = c.Op("ce_tvd_reduced_", _ce_tvd_reduced_,
                       _reduced_inplace_fake, mutates=("student",))


class _InPlace(torch.autograd.Function):
    """The reduced loss with the gradient written over the student's
    memory: the student's values are gone after the call."""

    @staticmethod
    def forward(ctx, student, teacher, target, alpha, beta, ignore_index,
                mean):
        loss, bad = ce_tvd_reduced_(student, teacher, target, alpha, beta,
                                    ignore_index, mean)
        ctx.save_for_backward(student)
        ctx.mark_non_differentiable(bad)
        ctx.eager = True  # scale_saved: in place
        return loss, bad

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss, _grad_bad):
        (grad,) = ctx.saved_tensors
        grad = c.scale_saved(ctx, grad, grad_loss)
        # A new handle on the student's memory: autograd keeps it as the
        # leaf's .grad instead of copying it.
        grad = None if grad is None else grad.detach()
        return grad, None, None, None, None, None, None


def _unreduced_args(student, teacher, target, ignore_index):
    bt, v = student.shape
    # Positional, in the order of tilejit_ce_tvd_args.
    return _capi.CeTvdArgs(
        c.DTYPES[student.dtype], bt, v, student.data_ptr(), teacher.data_ptr(),
        c.row_stride(student), 0, target.data_ptr(), ignore_index, None, None,
        0)


def _ce_tvd_forward(student: Tensor, teacher: Tensor, target: Tensor,
                    ignore_index: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row (ce, tvd), f32 (BT,) each, and the state the backward reads
    (uint8; its last 16 bytes start with the bad-target flag, an int32)."""
    student, teacher = _rows(student, teacher)
    target = target.contiguous()
    bt = student.size(0)
    ce = torch.zeros(bt, dtype=torch.float32, device=student.device)
    tvd = torch.zeros(bt, dtype=torch.float32, device=student.device)
    state = torch.zeros(_state_bytes(bt), dtype=torch.uint8,
                        device=student.device)
    a = _unreduced_args(student, teacher, target, ignore_index)
    c.call_on(student, lambda device, stream: _capi.check(
        _lib().tilejit_ce_tvd_forward(ctypes.byref(a), ce.data_ptr(),
                                      tvd.data_ptr(), state.data_ptr(),
                                      device, stream)))
    return ce, tvd, state


def _forward_fake(student, teacher, target, ignore_index):
    bt = student.size(0)
    return (student.new_empty((bt,), dtype=torch.float32),
            student.new_empty((bt,), dtype=torch.float32),
            student.new_empty((_state_bytes(bt),), dtype=torch.uint8))


def _ce_tvd_backward(student: Tensor, teacher: Tensor, target: Tensor,
                     state: Tensor, grad_ce: Tensor, grad_tvd: Tensor,
                     ignore_index: int) -> Tensor:
    """grad_ce * d ce / d student + grad_tvd * d tvd / d student."""
    student, teacher = _rows(student, teacher)
    grad = torch.empty(student.shape, dtype=student.dtype,
                       device=student.device)
    gce = grad_ce.to(torch.float32).contiguous()
    gtvd = grad_tvd.to(torch.float32).contiguous()
    a = _unreduced_args(student, teacher, target.contiguous(), ignore_index)
    c.call_on(student, lambda device, stream: _capi.check(
        _lib().tilejit_ce_tvd_backward(
            ctypes.byref(a), state.data_ptr(), gce.data_ptr(),
            gtvd.data_ptr(), grad.data_ptr(), c.row_stride(grad), device,
            stream)))
    return grad


def _backward_fake(student, teacher, target, state, grad_ce, grad_tvd,
                   ignore_index):
    return student.new_empty(student.shape)


ce_tvd_backward = c.Op("ce_tvd_backward", _ce_tvd_backward, _backward_fake)


def _forward_setup(ctx, inputs, output):
    student, teacher, target, ignore_index = inputs
    ctx.ignore_index = ignore_index
    ctx.save_for_backward(student, teacher, target, output[2])


def _forward_backward(ctx, grad_ce, grad_tvd, _grad_state):
    student, teacher, target, state = ctx.saved_tensors
    bt = student.size(0)
    if grad_ce is None:
        grad_ce = student.new_zeros((bt,), dtype=torch.float32)
    if grad_tvd is None:
        grad_tvd = student.new_zeros((bt,), dtype=torch.float32)
    grad = ce_tvd_backward(student, teacher, target, state, grad_ce,
                           grad_tvd, ctx.ignore_index)
    return grad, None, None, None


ce_tvd_forward = c.Op("ce_tvd_forward", _ce_tvd_forward, _forward_fake,
                      _forward_setup, _forward_backward)


def _flatten(student, teacher, target):
    c.check_float("student", student)
    c.check_float("teacher", teacher)
    c.check_device(student)
    c.same_device(student=student, teacher=teacher, target=target)
    if student.dim() < 1 or student.shape != teacher.shape:
        raise ValueError(f"student {tuple(student.shape)} and teacher "
                         f"{tuple(teacher.shape)} must be (..., V), alike")
    if student.dtype != teacher.dtype:
        raise TypeError(f"student is {student.dtype}, teacher {teacher.dtype}")
    v = student.size(-1)
    if v < 1:
        raise ValueError("the vocab (last dimension) is empty")
    s2 = student if student.dim() == 2 else student.reshape(-1, v)
    t2 = teacher if teacher.dim() == 2 else teacher.reshape(-1, v)
    return s2, t2, c.as_target(target, s2.size(0))


def fused_ce_tvd(student, teacher, target, *, alpha=1.0, beta=1.0,
                 ignore_index=-100, reduction="mean", in_place=False,
                 return_bad_target=False):
    """alpha * cross_entropy(student, target) + beta * tvd(softmax(student),
    softmax(teacher)) over rows whose target is not ignore_index.

    student, teacher: (..., V) logits, bf16/f16/f32, same shape and dtype;
    target: (...) class indices. reduction "mean" (over valid rows) or "sum":
    the f32 scalar loss, its gradient computed in this call; "none": (ce,
    tvd), f32 (BT,) each, already multiplied by alpha and beta (their sum
    over valid rows is the "sum" loss). in_place (mean/sum): the gradient is
    written over the student's memory (its values are lost; eager mode).
    With return_bad_target, also an int32 (1,) tensor: 0, or 1 + a
    row whose target is outside [0, V) and not ignore_index (such rows count
    as ignored); reading it synchronizes, so the op never does.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', not "
                         f"{reduction!r}")
    s2, t2, tgt = _flatten(student, teacher, target)
    alpha, beta, ignore_index = float(alpha), float(beta), int(ignore_index)
    if reduction == "none":
        if in_place:
            raise ValueError("in_place is for reduction 'mean' or 'sum'")
        ce, tvd, state = ce_tvd_forward(s2, t2.detach(), tgt, ignore_index)
        out = (ce * alpha, tvd * beta)
        bt = s2.size(0)
        bad = state[_bad_offset(bt):_bad_offset(bt) + 4].view(torch.int32)
    elif in_place:
        c.refuse_traced_in_place()
        loss, bad = _InPlace.apply(s2, t2.detach(), tgt, alpha, beta,
                                   ignore_index, reduction == "mean")
        out = loss
    else:
        loss, _, bad = ce_tvd_reduced(s2, t2.detach(), tgt, alpha, beta,
                                      ignore_index, reduction == "mean")
        out = loss
    return (out, bad) if return_bad_target else out


class FusedCETVDLoss(torch.nn.Module):
    """fused_ce_tvd as a module: forward(student, teacher, target). After
    each call, self.bad_target holds the flag; check_targets() reads it
    (synchronizing) and raises ValueError for an out-of-range target."""

    def __init__(self, alpha=1.0, beta=1.0, ignore_index=-100,
                 reduction="mean", in_place=False):
        super().__init__()
        self.alpha, self.beta = alpha, beta
        self.ignore_index, self.reduction = ignore_index, reduction
        self.in_place = in_place
        self.bad_target = None

    def forward(self, student, teacher, target):
        out, self.bad_target = fused_ce_tvd(
            student, teacher, target, alpha=self.alpha, beta=self.beta,
            ignore_index=self.ignore_index, reduction=self.reduction,
            in_place=self.in_place, return_bad_target=True)
        return out

    def check_targets(self):
        if self.bad_target is not None and int(self.bad_target[0]) != 0:
            raise ValueError(f"target of row {int(self.bad_target[0]) - 1} "
                             "is outside [0, V) and not ignore_index")
