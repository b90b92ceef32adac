"""The chunked fused linear cross-entropy (docs/semantics.md §2) as a
PyTorch operator: tilejit::linear_ce computes the loss of
cross_entropy(input @ weight.T + bias, target) and all its gradients in one
call, never holding more than a chunk of the logits.

The C ABI takes bias and class weights in f32 and accumulates grad_weight
and grad_bias in f32 (bf16 with bf16_grad_accumulation): the Python
functions cast on the way in, the op rounds grad_weight of a bf16 weight to
bf16 once at the end, and autograd casts the rest to the parameters'
dtypes.
reduction "mean"/"sum": the forward keeps the gradients and backward scales
them by grad_output in place (scale_grad: on the device, and no work when
grad_output is 1). reduction "none": the per-row gradients depend on
grad_output, so backward calls the op again with it (two passes over the
logits).
"""
import ctypes
from typing import Optional

import torch
from torch import Tensor

from .. import _capi
from . import _common as c

_REDUCTIONS = {"none": _capi.REDUCTION_NONE, "mean": _capi.REDUCTION_MEAN,
               "sum": _capi.REDUCTION_SUM}
_GEMMS = {"cublaslt": _capi.GEMM_CUBLASLT, "tilejit": _capi.GEMM_TILEJIT,
          "auto": _capi.GEMM_AUTO}
_GEMM_WORKSPACE = 8 << 20


# Problems prepared in this process: the GEMM algorithms (cuBLASLt's first
# 8 timed) and lce_gemm compiles are chosen once per shape and features,
# on the call's own buffers, before the first call; never inside a CUDA
# graph capture (prepare synchronizes), where the call prepares itself
# without timing.
_prepared = set()
_GEMM_CANDIDATES = 8


def _prepare_once(a, ws, nbytes, stream, dev):
    key = (dev.index, a.dtype, a.n, a.d, a.v, bool(a.bias),
           bool(a.class_weight), a.reduction, a.label_smoothing > 0,
           a.z_loss > 0, a.softcap > 0, a.chunk_rows, a.memory_budget_bytes,
           a.bf16_grad_accumulation, a.gemm_backend)
    if key in _prepared or torch.cuda.is_current_stream_capturing():
        return
    _capi.check(_capi.lib().tilejit_linear_ce_prepare(
        ctypes.byref(a), c.ptr(ws), nbytes, _GEMM_CANDIDATES, 0, stream,
        None))
    _prepared.add(key)


def _linear_ce(input: Tensor, weight: Tensor, target: Tensor,
               bias: Optional[Tensor], ce_weight: Optional[Tensor],
               grad_output: Optional[Tensor], ignore_index: int,
               lse_square_scale: float, label_smoothing: float,
               softcap: float, reduction: int, chunk_rows: int,
               memory_budget: int, bf16_grad_accumulation: bool,
               gemm: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                          Tensor]:
    """(loss (2): loss and its z-loss part, row_loss (n), row_z_loss (n),
    grad_input (n, d), grad_weight (v, d; bf16 for bf16 weights, else f32),
    grad_bias (v, f32, or 0 without a bias), bad_target (1) int32) for input (n, d),
    weight (v, d). Reduction none: the gradients for per-row upstream
    grad_output (None: zeros)."""
    input, weight = c.row_major(input), c.row_major(weight)
    n, d = input.shape
    v = weight.size(0)
    dev = input.device
    f32 = dict(dtype=torch.float32, device=dev)
    acc = torch.bfloat16 if bf16_grad_accumulation else torch.float32
    loss = torch.zeros(2, **f32)
    row_loss = torch.zeros(n, **f32)
    row_z = torch.zeros(n, **f32)
    grad_input = torch.empty(n, d, dtype=input.dtype, device=dev)
    grad_weight = torch.empty(v, d, dtype=acc, device=dev)
    grad_bias = torch.empty(v if bias is not None else 0, dtype=acc,
                            device=dev)
    bad = torch.zeros(1, dtype=torch.int32, device=dev)
    target = target.contiguous()
    bias = None if bias is None else bias.contiguous()
    ce_weight = None if ce_weight is None else ce_weight.contiguous()
    if grad_output is not None:
        grad_output = grad_output.to(torch.float32).contiguous()
    elif reduction == _capi.REDUCTION_NONE:
        grad_output = torch.zeros(n, **f32)  # the forward: losses only
    gpu = dev.type == "cuda"
    # Positional, in the order of tilejit_linear_ce_args.
    a = _capi.LinearCeArgs(
        c.DTYPES[input.dtype], n, d, v, input.data_ptr(), c.row_stride(input),
        weight.data_ptr(), c.row_stride(weight), c.ptr(bias),
        target.data_ptr(), c.ptr(ce_weight), c.ptr(grad_output),
        ignore_index, label_smoothing, lse_square_scale, softcap, reduction,
        loss.data_ptr(), row_loss.data_ptr(), row_z.data_ptr(), None,
        grad_input.data_ptr(), d, grad_weight.data_ptr(),
        grad_bias.data_ptr() if bias is not None else None, bad.data_ptr(),
        chunk_rows, memory_budget, _GEMM_WORKSPACE if gpu else 0,
        int(gpu and input.dtype != torch.float32),
        int(bf16_grad_accumulation), gemm, None, 0)
    lib = _capi.lib()

    def run(device, stream):
        nbytes = ctypes.c_size_t()
        _capi.check(lib.tilejit_linear_ce_workspace_bytes(
            ctypes.byref(a), device, ctypes.byref(nbytes)))
        ws = c.workspace(nbytes.value, dev)
        if gpu:
            _prepare_once(a, ws, nbytes.value, stream, dev)
        _capi.check(lib.tilejit_linear_ce(ctypes.byref(a), ws.data_ptr(),
                                          nbytes.value, device, stream))
    c.call_on(input, run)
    if grad_weight.dtype != _grad_weight_dtype(weight.dtype,
                                               bf16_grad_accumulation):
        # Accumulated in f32 over the chunks; one rounding to bf16 here, so
        # that the saved gradient and the one autograd passes on take half
        # the memory (before backward's scaling by grad_output: a second
        # rounding when that is not 1).
        grad_weight = grad_weight.to(torch.bfloat16)
    if reduction != _capi.REDUCTION_NONE:
        for g in (grad_input, grad_weight, grad_bias):
            c.scale_kernel(dev, g.dtype)  # for the backward
    return loss, row_loss, row_z, grad_input, grad_weight, grad_bias, bad


def _grad_weight_dtype(weight_dtype, bf16_grad_accumulation):
    """grad_weight's dtype out of the op: bf16 for bf16 weights (rounded
    once from the f32 sum) or bf16 accumulation; else f32, which autograd
    casts after backward's scaling (an f16 sum could overflow before a
    small grad_output brings it back into range)."""
    if bf16_grad_accumulation or weight_dtype == torch.bfloat16:
        return torch.bfloat16
    return torch.float32


def _linear_ce_fake(input, weight, target, bias, ce_weight, grad_output,
                    ignore_index, lse_square_scale, label_smoothing, softcap,
                    reduction, chunk_rows, memory_budget,
                    bf16_grad_accumulation, gemm):
    n, d = input.shape
    v = weight.size(0)
    acc = torch.bfloat16 if bf16_grad_accumulation else torch.float32
    f32 = torch.float32
    return (input.new_empty((2,), dtype=f32), input.new_empty((n,), dtype=f32),
            input.new_empty((n,), dtype=f32), input.new_empty((n, d)),
            weight.new_empty((v, d), dtype=_grad_weight_dtype(
                weight.dtype, bf16_grad_accumulation)),
            input.new_empty((v if bias is not None else 0,), dtype=acc),
            input.new_empty((1,), dtype=torch.int32))


def _setup(ctx, inputs, output):
    (input, weight, target, bias, ce_weight, _go, *scalars) = inputs
    ctx.scalars = scalars
    ctx.has_bias = bias is not None
    ctx.none = scalars[4] == _capi.REDUCTION_NONE
    if ctx.none:
        ctx.save_for_backward(input, weight, target, bias, ce_weight)
    else:
        ctx.save_for_backward(*output[3:6])


def _backward(ctx, grad_loss, grad_row, *_ignored):
    if ctx.none:
        input, weight, target, bias, ce_weight = ctx.saved_tensors
        if grad_row is None:
            grad_row = input.new_zeros((input.size(0),), dtype=torch.float32)
        out = linear_ce(input, weight, target, bias, ce_weight, grad_row,
                        *ctx.scalars)
        gi, gw, gb = out[3:6]
    elif grad_loss is None:
        gi = gw = gb = None
    else:  # only the gradients asked for are scaled
        g = grad_loss[0]
        wanted = [ctx.needs_input_grad[i] for i in (0, 1, 3)]
        gi, gw, gb = (c.scale_saved(ctx, t, g) if want else None
                      for t, want in zip(ctx.saved_tensors, wanted))
    return (gi, gw, None, gb if ctx.has_bias else None, None, None,
            *([None] * len(ctx.scalars)))


linear_ce = c.Op("linear_ce", _linear_ce, _linear_ce_fake, _setup, _backward)


def _check(input, weight, target, bias, ce_weight, reduction,
           label_smoothing, lse_square_scale, softcap):
    c.check_float("input", input)
    c.check_float("weight", weight)
    c.check_device(input)
    c.same_device(input=input, weight=weight, target=target, bias=bias,
                  ce_weight=ce_weight)
    if input.dtype != weight.dtype:
        raise TypeError(f"input is {input.dtype}, weight {weight.dtype}")
    if weight.dim() != 2 or input.dim() < 1 or input.size(-1) != weight.size(1):
        raise ValueError(f"input {tuple(input.shape)} must be (..., d) and "
                         f"weight {tuple(weight.shape)} (V, d)")
    for name, t in (("bias", bias), ("ce_weight", ce_weight)):
        if t is not None:
            c.check_float(name, t)
            if t.shape != (weight.size(0),):
                raise ValueError(f"{name} {tuple(t.shape)} must be (V,) = "
                                 f"({weight.size(0)},)")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', not "
                         f"{reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], not "
                         f"{label_smoothing}")
    if lse_square_scale < 0:
        raise ValueError("lse_square_scale must be >= 0")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"softcap must be None or > 0, not {softcap}")


def linear_cross_entropy(input, weight, target, bias=None, *, ce_weight=None,
                         ignore_index=-100, lse_square_scale=0.0,
                         label_smoothing=0.0, reduction="mean", softcap=None,
                         return_z_loss=False, chunk_rows=None,
                         memory_budget=None, accum_dtype=None,
                         return_bad_target=False, gemm="cublaslt"):
    """cross_entropy(softcap(input @ weight.T + bias), target,
    weight=ce_weight, ignore_index=, label_smoothing=, reduction=) plus
    lse_square_scale * lse^2 per valid row (Liger's z-loss), without the
    full logits: chunk_rows rows at a time, or as many as memory_budget
    bytes of workspace allow (neither: one chunk).

    input (..., d), weight (V, d): bf16/f16/f32, one dtype; target (...);
    bias, ce_weight (V,) any float dtype (passed as f32). Returns the f32
    loss (a scalar, or (N,) for "none"); with return_z_loss (loss, z_loss),
    z_loss its z-loss part (for logging: no gradient flows through it).
    accum_dtype=torch.bfloat16 accumulates grad_weight/grad_bias in bf16
    (bf16 inputs). With return_bad_target, also the int32 (1,) flag: 0, or
    1 + a row whose target is outside [0, V) and not ignore_index (counted
    as ignored); the op never reads it on the host.

    gemm picks who runs the chunk's products: "cublaslt"; "tilejit", the
    DSL's own tensor-core GEMMs (bf16/f16), with the logits GEMM folding
    each row's max and sum-exp into its epilogue so that the row program
    reads the logits once (on the CPU: the interpreter, slowly); or "auto",
    which times both per product on the first call of each shape.
    """
    _check(input, weight, target, bias, ce_weight, reduction,
           float(label_smoothing), float(lse_square_scale), softcap)
    if gemm not in _GEMMS:
        raise ValueError(f"gemm must be 'cublaslt', 'tilejit' or 'auto', not "
                         f"{gemm!r}")
    if gemm == "tilejit" and input.dtype == torch.float32:
        raise TypeError("gemm='tilejit' takes bf16 or f16 inputs, not "
                        "float32")
    if accum_dtype not in (None, torch.float32, torch.bfloat16):
        raise ValueError(f"accum_dtype must be None, float32 or bfloat16, not "
                         f"{accum_dtype}")
    x = input if input.dim() == 2 else input.reshape(-1, input.size(-1))
    tgt = c.as_target(target, x.size(0))
    out = linear_ce(
        x, weight, tgt, None if bias is None else bias.float(),
        None if ce_weight is None else ce_weight.detach().float(), None,
        int(ignore_index), float(lse_square_scale), float(label_smoothing),
        float(softcap or 0.0), _REDUCTIONS[reduction], int(chunk_rows or 0),
        int(memory_budget or 0), accum_dtype == torch.bfloat16, _GEMMS[gemm])
    if reduction == "none":
        loss, z_loss = out[1], out[2].detach()
    else:
        loss, z_loss = out[0][0], out[0][1].detach()
    res = (loss, z_loss) if return_z_loss else loss
    if return_bad_target:
        return (*res, out[6]) if return_z_loss else (res, out[6])
    return res


class FusedLinearCrossEntropyLoss(torch.nn.Module):
    """linear_cross_entropy as a module, argument for argument as Liger's
    LigerFusedLinearCrossEntropyLoss: forward(lin_weight, _input, target,
    bias=None)."""

    def __init__(self, ce_weight=None, ignore_index=-100,
                 lse_square_scale=0.0, label_smoothing=0.0, reduction="mean",
                 softcap=None, return_z_loss=False, accum_dtype=None,
                 chunk_rows=None, memory_budget=None, gemm="cublaslt"):
        super().__init__()
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1], not "
                             f"{label_smoothing}")
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', "
                             f"not {reduction!r}")
        self.ce_weight = ce_weight
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.softcap = softcap
        self.return_z_loss = return_z_loss
        self.accum_dtype = accum_dtype
        self.chunk_rows, self.memory_budget = chunk_rows, memory_budget
        self.gemm = gemm

    def forward(self, lin_weight, _input, target, bias=None):
        return linear_cross_entropy(
            _input, lin_weight, target, bias, ce_weight=self.ce_weight,
            ignore_index=self.ignore_index,
            lse_square_scale=self.lse_square_scale,
            label_smoothing=self.label_smoothing, reduction=self.reduction,
            softcap=self.softcap, return_z_loss=self.return_z_loss,
            chunk_rows=self.chunk_rows, memory_budget=self.memory_budget,
            accum_dtype=self.accum_dtype, gemm=self.gemm)
