"""What both losses share: dtypes, devices, streams and workspace."""
import contextlib
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
    return target.reshape(rows).to(torch.int64).contiguous()


def row_major(t):
    """t (2-D) with unit column stride, a copy only when needed."""
    if t.size(1) > 1 and t.stride(1) != 1 or t.size(0) > 1 and t.stride(0) < t.size(1):
        return t.contiguous()
    return t


def row_stride(t):
    return t.stride(0) if t.size(0) > 1 else t.size(1)


@contextlib.contextmanager
def on_device(t):
    """(tilejit_device, stream) for t: the CPU interpreter, or t's GPU on
    torch's current stream."""
    if t.device.type == "cuda":
        with torch.cuda.device(t.device):
            yield _capi.DEVICE_GPU, ctypes.c_void_p(
                torch.cuda.current_stream(t.device).cuda_stream)
    else:
        yield _capi.DEVICE_CPU, None


def workspace(nbytes, device):
    """Workspace from torch's allocator (the caching allocator on CUDA)."""
    return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=device)
