"""k[grid](*args): binds and checks the arguments, then launches on the GPU
or runs the CPU interpreter, by where the tensors are."""
import ctypes
import operator

import torch

from . import _capi
from ._kernel import check_pointer, check_scalar


def grid_of(kernel, grid):
    """grid (an int, a tuple of 1 to 3 ints, or a function of k.meta giving
    one) as three ints."""
    if callable(grid):
        grid = grid(kernel.meta)
    dims = (grid,) if not isinstance(grid, (tuple, list)) else tuple(grid)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"kernel '{kernel.name}': a grid has 1 to 3 "
                         f"dimensions, got {len(dims)}")
    out = []
    for d in dims:
        if isinstance(d, bool):
            raise TypeError(f"kernel '{kernel.name}': grid sizes are ints, "
                            "not bool")
        try:
            d = operator.index(d)
        except TypeError:
            raise TypeError(f"kernel '{kernel.name}': grid sizes are ints, "
                            f"not {type(d).__name__}") from None
        if d < 0:
            raise ValueError(f"kernel '{kernel.name}': negative grid size "
                             f"{d}")
        out.append(d)
    return out + [1] * (3 - len(out))


def bind(kernel, args, kwargs):
    """One value per parameter, in order, from positional then keyword
    arguments."""
    params = kernel.params
    names = ", ".join(p.name for p in params)
    if len(args) > len(params):
        raise TypeError(f"kernel '{kernel.name}' takes {len(params)} "
                        f"arguments ({names}), got {len(args) + len(kwargs)}")
    values = dict(zip((p.name for p in params), args))
    for key, value in kwargs.items():
        if key not in {p.name for p in params}:
            raise TypeError(f"kernel '{kernel.name}' has no parameter "
                            f"'{key}' (its parameters: {names})")
        if key in values:
            raise TypeError(f"kernel '{kernel.name}': argument '{key}' given "
                            "twice")
        values[key] = value
    missing = [p.name for p in params if p.name not in values]
    if missing:
        raise TypeError(f"kernel '{kernel.name}' takes {len(params)} "
                        f"arguments ({names}), missing {', '.join(missing)}")
    return [values[p.name] for p in params]


def launch(kernel, grid, args, kwargs):
    grid = grid_of(kernel, grid)
    values = bind(kernel, args, kwargs)
    c_args, devices = [], {}
    for p, v in zip(kernel.params, values):
        if p.pointer:
            c_args.append(check_pointer(kernel.name, p, v))
            devices.setdefault(v.device, p.name)
        else:
            c_args.append(check_scalar(kernel.name, p, v))
    if len(devices) > 1:
        where = ", ".join(f"'{n}' on {d}" for d, n in devices.items())
        raise ValueError(f"kernel '{kernel.name}': tensors on different "
                         f"devices ({where})")
    device = next(iter(devices), torch.device("cpu"))
    arr = (_capi.Arg * max(len(c_args), 1))(*c_args)
    g = (ctypes.c_int64 * 3)(*grid)
    lib = _capi.lib()
    if device.type == "cuda":
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            _capi.check(lib.tilejit_kernel_launch(
                kernel._handle, g, arr, len(c_args), ctypes.c_void_p(stream)))
    else:
        _capi.check(lib.tilejit_kernel_run_cpu(kernel._handle, g, arr,
                                               len(c_args)))
