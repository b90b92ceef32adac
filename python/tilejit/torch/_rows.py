"""What the row divergences (kl_div, jsd) share: one kernel gives each
row's loss and the gradient of the rows' sum; these turn that into the
reductions "batchmean" (over the rows not ignored), "sum" and "none", with
backward scaling the saved gradient on the device."""
import torch

from . import _common as c

REDUCTIONS = ("none", "batchmean", "sum")


_ones = {}


def run(name, student, teacher, target, scale, scalar_args):
    """Registered row kernel `name` (student, teacher, label, loss, grad,
    grad_scale, *scalar_args; HAS_LABEL selects the labels) on contiguous
    (BT, V) rows: (per-row loss (BT,) f32, d sum / d student times scale);
    rows whose target is ignore_index give 0. scale: an f32 device scalar,
    or None for 1."""
    student, teacher = student.contiguous(), teacher.contiguous()
    bt = student.size(0)
    dev = student.device
    if scale is None:
        scale = _ones.get(dev)
        if scale is None:
            scale = _ones[dev] = torch.ones(1, dtype=torch.float32,
                                            device=dev)
    loss = torch.empty(bt, dtype=torch.float32, device=dev)
    grad = torch.empty_like(student)
    labels = target.contiguous() if target is not None else \
        torch.empty(1, dtype=torch.int64, device=dev)  # not read
    if bt:
        k = c.kernel_on(dev, name, student.dtype,
                        shape={"V": student.size(1)},
                        HAS_LABEL=int(target is not None))
        c.launch(k, bt, [c.tensor_arg(student), c.tensor_arg(teacher),
                         c.tensor_arg(labels), c.tensor_arg(loss),
                         c.tensor_arg(grad),
                         c.tensor_arg(scale.reshape(1).contiguous()),
                         *scalar_args], student)
    return loss, grad


def fake(student, teacher, target, *scalars):
    return (student.new_empty((student.size(0),), dtype=torch.float32),
            student.new_empty(student.shape))


def setup(ctx, inputs, output):
    ctx.inputs = len(inputs)
    ctx.save_for_backward(output[1])


def backward(ctx, grad_rows, _grad_grad):
    (grad,) = ctx.saved_tensors
    return (c.scale_rows(ctx, grad, grad_rows),) + (None,) * (ctx.inputs - 1)


class _Reduced(torch.autograd.Function):
    """The rows' sum times `scale` (a device scalar: 1, or 1 / n_valid)
    for impl(student, teacher, target, scale, *args) -> (rows, d sum /
    d student times scale): the kernel folds the scale into the gradient,
    and backward scales it by grad_output in place (nothing to do when it
    is 1)."""

    @staticmethod
    def forward(ctx, impl, student, teacher, target, scale, *args):
        rows, grad = impl(student, teacher, target, scale, *args)
        c.scale_kernel(grad.device, grad.dtype)  # for the backward
        ctx.save_for_backward(grad)
        ctx.eager = True  # scale_saved: in place
        ctx.extra = len(args)
        return (rows.sum() * scale).reshape(())

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        (grad,) = ctx.saved_tensors
        return (None, c.scale_saved(ctx, grad, grad_loss)) + \
            (None,) * (3 + ctx.extra)


def count(target, rows, ignore_index):
    """The rows not ignored, at least 1, as an f32 device scalar."""
    if target is None:
        return torch.full((), max(rows.size(0), 1), dtype=torch.float32,
                          device=rows.device)
    return (target != ignore_index).sum().clamp(min=1).to(torch.float32)


def reduce(op, scaled, shape, s2, t2, target, args, reduction,
           ignore_index):
    """op (a _common.Op over (student, teacher, target, *args)) on the
    flattened rows, reduced; scaled(student, teacher, target, scale, *args)
    its implementation with the gradient times a device scalar; shape: the
    leading shape for "none"."""
    if reduction == "none" or c._traced():
        rows = op(s2, t2, target, *args)[0]
        if reduction == "none":
            return rows.reshape(shape)
        total = rows.sum()
        return total if reduction == "sum" else \
            total / count(target, s2, ignore_index)
    scale = torch.ones((), dtype=torch.float32, device=s2.device) \
        if reduction == "sum" else \
        1.0 / count(target, s2, ignore_index)
    if not c.needs_grad(s2):
        return op.impl(s2, t2, target, *args)[0].sum() * scale
    return _Reduced.apply(scaled, s2, t2, target, scale, *args)


def flatten(student, teacher, target, names, reduction):
    """(student, teacher, target) as (BT, V), (BT, V) detached and (BT,)
    int64 or None, after the checks both losses make."""
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
    return s2, t2, tgt
