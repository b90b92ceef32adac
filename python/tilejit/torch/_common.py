"""What the losses share: dtypes, devices, streams, workspace, the operator
wrapper (a custom op for torch.compile, an autograd.Function in eager mode)
and the in-place scaling of a saved gradient by its upstream gradient."""
import collections
import ctypes

import torch

from .. import _capi

DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.F16,
          torch.float32: _capi.F32}


def ptr(t):
    """The address of a tensor's data, or None for no tensor."""
    return None if t is None else t.data_ptr()


def check_float(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype not in DTYPES:
        raise TypeError(f"{name} must be bfloat16, float16 or float32, "
                        f"not {t.dtype}")


def check_device(t):
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"tilejit runs on CUDA and CPU tensors, not on "
                         f"{t.device}")


def same_device(**tensors):
    named = [(n, t) for n, t in tensors.items() if t is not None]
    first_name, first = named[0]
    for name, t in named[1:]:
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device}, {first_name} on "
                             f"{first.device}")


def as_target(target, rows, name="target"):
    """target as a contiguous int64 (rows,) tensor."""
    if not isinstance(target, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor")
    if target.dtype.is_floating_point or target.dtype.is_complex or \
            target.dtype == torch.bool:
        raise TypeError(f"{name} must hold class indices (an integer dtype), "
                        f"not {target.dtype}")
    if target.numel() != rows:
        raise ValueError(f"{name} has {target.numel()} elements for {rows} "
                         f"rows (shape {tuple(target.shape)})")
    if target.dtype == torch.int64 and target.dim() == 1 and \
            target.is_contiguous():
        return target
    return target.reshape(rows).to(torch.int64).contiguous()


def row_major(t):
    """t (2-D) with unit column stride, a copy only when needed."""
    if t.size(1) > 1 and t.stride(1) != 1 or t.size(0) > 1 and t.stride(0) < t.size(1):
        return t.contiguous()
    return t


def row_stride(t):
    return t.stride(0) if t.size(0) > 1 else t.size(1)


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def call_on(t, fn):
    """fn(tilejit_device, stream) for t: the CPU interpreter, or t's GPU on
    torch's current stream there (t's GPU made current for the call when it
    is not)."""
    if t.device.type != "cuda":
        return fn(_capi.DEVICE_CPU, None)
    index = t.device.index
    if torch.cuda.current_device() != index:
        with torch.cuda.device(index):
            return call_on(t, fn)
    stream = _raw_stream(index) if _raw_stream else \
        torch.cuda.current_stream(index).cuda_stream
    return fn(_capi.DEVICE_GPU, stream)


def workspace(nbytes, device):
    """Workspace from torch's allocator (the caching allocator on CUDA)."""
    return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=device)


def needs_grad(*tensors):
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in tensors)


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)


def _traced():
    """Whether something records or transforms the call (torch.compile,
    torch.jit.trace, a dispatch mode such as make_fx's or FlopCounterMode):
    then the ops go through the dispatcher, which the eager path skips."""
    return (torch.compiler.is_compiling() or torch.jit.is_tracing() or
            _dispatch_modes() > 0)


class Op:
    """The operator tilejit::NAME over `impl`, two ways in.

    As a torch.library custom op (fake implementation, autograd from `setup`
    and `backward`) it is what torch.compile traces and opcheck checks. In
    eager mode, calling the Op runs `impl` directly under an
    autograd.Function with the same setup and backward (or alone when no
    gradient is needed), without the custom op's dispatch (64 µs per call
    on a 2-core VM, an autograd.Function 20 µs). `mutates`: ("name",) when
    impl writes its first argument, whose version counter then moves."""

    def __init__(self, name, impl, fake, setup=None, backward=None,
                 mutates=()):
        self.impl = impl
        self.custom = torch.library.custom_op(f"tilejit::{name}", impl,
                                              mutates_args=mutates)
        self.custom.register_fake(fake)
        self.mutates = mutates
        self.function = None
        if backward is not None:
            torch.library.register_autograd(f"tilejit::{name}", backward,
                                            setup_context=setup)

            class Function(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *args):
                    ctx.set_materialize_grads(False)
                    ctx.eager = True
                    out = impl(*args)
                    setup(ctx, args, out)
                    return out

                @staticmethod
                @torch.autograd.function.once_differentiable
                def backward(ctx, *grads):
                    return backward(ctx, *grads)

            Function.__name__ = f"tilejit_{name}"
            self.function = Function

    def __call__(self, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if _traced() or any(type(t) not in _PLAIN for t in tensors):
            return self.custom(*args)  # the dispatcher must see the call
        if self.function is not None and needs_grad(*tensors):
            return self.function.apply(*args)
        out = self.impl(*args)
        if self.mutates:
            torch.autograd.graph.increment_version(args[0])
        return out


# scale_grad by (device, dtype): the kernel (kernel_on: made ready by the
# forward of the op whose gradient it scales), the programs of a launch (a
# few per SM: the kernel walks any size with a stride of their count) and
# its tile.
_ScaleGrad = collections.namedtuple("_ScaleGrad", "kernel programs block")
_scale_grads = {}
_kernels = {}


def kernel_on(device, name, dtype, shape=None, **params):
    """Registered kernel `name` compiled for dtype, params and the launch
    shape (sizes whose defaults follow them, as a row kernel's schedule
    follows V), and on a GPU loaded there: made ready by a forward, so that
    a backward captured in a CUDA graph never compiles. One per (device,
    name, dtype, shape, params)."""
    shape = dict(shape or {})
    key = (device, name, dtype, tuple(sorted(shape.items())),
           tuple(sorted(params.items())))
    k = _kernels.get(key)
    if k is None:
        from .._kernel import kernel
        k = kernel(name, dtype, shape=shape, **params)
        if device.type == "cuda":
            with torch.cuda.device(device):
                k.compile_gpu()
        _kernels[key] = k
    return k


def scale_kernel(device, dtype):
    k = _scale_grads.get((device, dtype))
    if k is None:
        compiled = kernel_on(device, "scale_grad", dtype)
        programs = 1
        if device.type == "cuda":
            props = torch.cuda.get_device_properties(device)
            programs = 4 * props.multi_processor_count
        k = _ScaleGrad(compiled, programs, compiled.meta["BLOCK_SIZE"])
        _scale_grads[(device, dtype)] = k
    return k


_ARG_CODES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.F16,
              torch.float32: _capi.F32, torch.int32: _capi.I32,
              torch.int64: _capi.I64}


def tensor_arg(t):
    """The tilejit_arg of a tensor: its data and the elements from there to
    the end of its storage (the interpreter's bound)."""
    elements = t.untyped_storage().nbytes() // t.element_size() - \
        t.storage_offset()
    return _capi.Arg(_capi.ARG_POINTER, _ARG_CODES[t.dtype], t.data_ptr(),
                     elements, 0, 0.0)


def i32_arg(v):
    return _capi.Arg(_capi.ARG_I32, _capi.I32, None, 0, int(v), 0.0)


def i64_arg(v):
    return _capi.Arg(_capi.ARG_I64, _capi.I64, None, 0, int(v), 0.0)


def f32_arg(v):
    return _capi.Arg(_capi.ARG_F32, _capi.F32, None, 0, 0, float(v))


def launch(kernel, programs, args, on):
    """kernel (a tilejit.Kernel) over `programs` programs with the
    tilejit_args `args`: on tensor `on`'s GPU on torch's current stream, or
    in the interpreter for CPU tensors. The arguments were built from the
    op's own tensors, so only the library checks them."""
    arr = (_capi.Arg * len(args))(*args)
    grid = (ctypes.c_int64 * 3)(programs, 1, 1)
    lib = _capi.lib()

    def run(device, stream):
        if device == _capi.DEVICE_CPU:
            _capi.check(lib.tilejit_kernel_run_cpu(kernel._handle, grid, arr,
                                                   len(args)))
        else:
            _capi.check(lib.tilejit_kernel_launch(kernel._handle, grid, arr,
                                                  len(args), stream))
    call_on(on, run)


def _scale_grad(grad: torch.Tensor, scale: torch.Tensor) -> None:
    """grad *= scale (one f32 element) in place, unless scale == 1; the
    scale is read on the device, never on the host."""
    n = grad.numel()
    if n == 0:
        return
    k = scale_kernel(grad.device, grad.dtype)
    launch(k.kernel, min(-(-n // k.block), k.programs),
           [tensor_arg(grad), tensor_arg(scale), i64_arg(n)], grad)


def _scale_grad_fake(grad, scale):
    return None


scale_grad_op = Op("scale_grad_", _scale_grad, _scale_grad_fake,
                   mutates=("grad",))


def scale_saved(ctx, grad, upstream):
    """grad (a gradient the forward saved) times the upstream gradient of a
    scalar loss: what the backward of a reduced loss returns.

    Eager (ctx from Op's autograd.Function): in place, with scale_grad. Its
    version counter moves, so a second backward through the same graph
    (retain_graph, and so torch.autograd.gradcheck) stops with autograd's
    in-place error instead of scaling twice; a double backward
    (create_graph) is refused too (once_differentiable). Traced (the custom op's autograd, under torch.compile): out of
    place, one pointwise pass in f32, as AOTAutograd does not let a backward
    mutate a saved output of the forward."""
    if upstream is None:  # the loss was not used
        return None
    g = upstream.detach().reshape(1).to(torch.float32)
    if not getattr(ctx, "eager", False):
        return (grad.float() * g).to(grad.dtype)
    if not grad.is_contiguous():  # an in-place student with padded rows
        return grad.mul_(g)
    scale_grad_op(grad, g.contiguous())
    return grad


def scale_rows(ctx, grad, grad_rows):
    """grad (BT, V) saved by a forward, row r times grad_rows[r]: the
    backward of a reduction "none" whose forward wrote the gradient of each
    row's own loss. Eager: in place (rounded once, the product in f32; the
    version counter moves, as in scale_saved); traced: out of place."""
    if grad_rows is None:
        return None
    g = grad_rows.detach().to(torch.float32).reshape(-1, 1)
    if getattr(ctx, "eager", False):
        return grad.mul_(g)
    return (grad.float() * g).to(grad.dtype)


def refuse_traced_in_place():
    if _traced():
        raise ValueError("in_place writes the gradient over its input: "
                         "eager mode only (not under torch.compile or "
                         "tracing)")
