"""Registered kernels from Python: compile with tilejit.kernel, launch with
k[grid](*args) on CUDA tensors (torch's current stream) or CPU tensors (the
interpreter)."""
import ctypes
import operator
from collections import namedtuple
from ctypes import byref, c_char_p, c_int32, c_int64, c_void_p

import torch

from . import _capi

_DTYPES = {torch.bool: _capi.I1, torch.int32: _capi.I32,
           torch.int64: _capi.I64, torch.bfloat16: _capi.BF16,
           torch.float16: _capi.F16, torch.float32: _capi.F32}
_TORCH = {v: k for k, v in _DTYPES.items()}
_NAMES = {_capi.I1: "i1", _capi.I32: "i32", _capi.I64: "i64",
          _capi.BF16: "bf16", _capi.F16: "f16", _capi.F32: "f32"}
_ALIASES = {"fp32": _capi.F32, "float32": _capi.F32, "fp16": _capi.F16,
            "float16": _capi.F16, "bfloat16": _capi.BF16}
_SCALAR_KIND = {_capi.I32: _capi.ARG_I32, _capi.I64: _capi.ARG_I64,
                _capi.F32: _capi.ARG_F32}
_INT_RANGE = {_capi.I32: (-2**31, 2**31 - 1), _capi.I64: (-2**63, 2**63 - 1)}

Param = namedtuple("Param", "name pointer dtype")
Param.__doc__ = ("A declared parameter: its name, whether it is a pointer, "
                 "and its dtype (a pointer's pointee) as a torch.dtype.")


def _dtype_code(dtype):
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPES:
            raise TypeError(f"tilejit has no dtype for {dtype}")
        return _DTYPES[dtype]
    if isinstance(dtype, str):
        code = {**{v: k for k, v in _NAMES.items()}, **_ALIASES}.get(dtype)
        if code is None:
            raise ValueError(f"unknown dtype {dtype!r} (bf16, f16, f32, ...)")
        return code
    raise TypeError(f"dtype must be a torch.dtype or a name such as 'bf16', "
                    f"not {type(dtype).__name__}")


def _param_value(name, value):
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int):
        raise TypeError(f"compile-time parameter {name} must be an int, not "
                        f"{type(value).__name__}")
    return f"{name}={value}"


def _size_arrays(sizes, what):
    """(char*[], int64[]) of a {name: int} dict, its values checked."""
    for k, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{what} {k} must be an int, not "
                            f"{type(v).__name__}")
    return ((c_char_p * len(sizes))(*(k.encode() for k in sizes)),
            (c_int64 * len(sizes))(*sizes.values()))


def _parse_config(text):
    """"BLOCK_SIZE=2048,...,dtype=f32" as a dict, integers as ints."""
    out = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def kernel(name, dtype, *, tuned=False, shape=None, arch=None, **params):
    """Compiles registered kernel `name` for `dtype` (a torch.dtype or
    'bf16', 'f16', 'f32').

    params: compile-time parameters NAME=VALUE (BLOCK_SIZE=2048, num_warps=4);
    the rest keep their defaults. tuned=True (no params): the config
    `tilejit tune` stored for the current GPU, dtype and shape, else the
    defaults (k.config_source says which). shape: the launch sizes a spec's
    tuning key needs, e.g. {"BT": 4096, "V": 151936}. arch: the GPU target
    ("sm_90"; None: the current device's)."""
    if tuned and params:
        raise ValueError("tuned=True takes the stored config: pass no "
                         f"parameters (got {', '.join(params)})")
    sets = [_param_value(k, v) for k, v in params.items()]
    set_arr, n_set = _capi.string_array(sets)
    shape = dict(shape or {})
    names, values = _size_arrays(shape, "shape")
    out = c_void_p()
    lib = _capi.lib()
    _capi.check(lib.tilejit_kernel_compile_flags(
        name.encode(), _dtype_code(dtype), set_arr, n_set,
        names if shape else None, values if shape else None, len(shape),
        arch.encode() if arch else None,
        _capi.COMPILE_TUNED if tuned else 0, byref(out)))
    return Kernel(out)


def tune(name, dtype, sizes, *, set=None, repetitions=20, retune=False):
    """Tunes registered kernel `name` on the current GPU, as `tilejit tune`
    does, and returns the winning config as a dict ({"BLOCK_SIZE": 4096,
    "num_warps": 8}). For kernels whose spec declares how to run them (jsd,
    a kernel library's own): each candidate runs on generated inputs of the
    launch `sizes` (every size the spec declares, e.g. {"BT": 4096, "V":
    151936}), checked against the spec's fp64 reference, timed over
    `repetitions` launches; the fastest is stored in the tuning database,
    where kernel(..., tuned=True, shape=sizes) finds it. set: scalar
    arguments ("beta=0.5"), as a dict or NAME=VALUE strings. A config
    stored before is returned as it is unless retune=True."""
    if isinstance(set, dict):
        set = [f"{k}={v}" for k, v in set.items()]
    set_arr, n_set = _capi.string_array(set)
    names, values = _size_arrays(sizes, "size")
    best = ctypes.create_string_buffer(1024)
    _capi.check(_capi.lib().tilejit_kernel_tune(
        name.encode(), _dtype_code(dtype), names, values, len(sizes),
        set_arr, n_set, int(repetitions), int(bool(retune)), best,
        len(best)))
    return _parse_config(best.value.decode())


class Kernel:
    """A compiled kernel (tilejit.kernel). k[grid](*args) runs it."""

    def __init__(self, handle):
        self._handle = handle
        lib = _capi.lib()
        self.name = lib.tilejit_kernel_name(handle).decode()
        self.config = lib.tilejit_kernel_config(handle).decode()
        self.config_source = lib.tilejit_kernel_config_source(handle).decode()
        params = []
        for i in range(lib.tilejit_kernel_num_params(handle)):
            pname, pointer, dtype = c_char_p(), c_int32(), c_int32()
            _capi.check(lib.tilejit_kernel_param(handle, i, byref(pname),
                                                 byref(pointer), byref(dtype)))
            params.append(Param(pname.value.decode(), bool(pointer.value),
                                _TORCH[dtype.value]))
        self.params = tuple(params)

    @property
    def meta(self):
        """The config as a dict, integers as ints ({"BLOCK_SIZE": 2048,
        ..., "dtype": "f32"}): what a grid function receives."""
        return _parse_config(self.config)

    def compile_gpu(self):
        """Compiles for the current GPU now (before capturing a launch in a
        CUDA graph); launches otherwise compile on first use."""
        _capi.check(_capi.lib().tilejit_kernel_compile_gpu(self._handle))

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, *args, **kwargs)

    def run(self, grid, *args, **kwargs):
        """k[grid](*args): one argument per parameter (positional, then by
        name): tensors for pointers, ints and floats for scalars."""
        launch(self, grid, args, kwargs)

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and _capi is not None and _capi._lib is not None:
            _capi._lib.tilejit_kernel_destroy(handle)

    def __repr__(self):
        return f"<tilejit.Kernel {self.name} {self.config}>"


def check_scalar(kernel_name, p, value):
    """The tilejit_arg of scalar parameter p, after checking value's kind."""
    code = _DTYPES[p.dtype]
    what = f"kernel '{kernel_name}': argument '{p.name}' ({_NAMES[code]})"
    if isinstance(value, torch.Tensor):
        raise TypeError(f"{what} is a scalar, got a tensor (pass a Python "
                        "number, e.g. t.item())")
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a number, not bool")
    if code == _capi.F32:
        if not isinstance(value, (int, float)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise TypeError(f"{what} must be a float, not "
                                f"{type(value).__name__}") from None
        return _capi.Arg(_capi.ARG_F32, code, None, 0, 0, float(value))
    if code not in _SCALAR_KIND:
        raise TypeError(f"{what}: scalars of this dtype are not supported")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not "
                        f"{type(value).__name__}") from None
    lo, hi = _INT_RANGE[code]
    if not lo <= value <= hi:
        raise ValueError(f"{what}: {value} is outside [{lo}, {hi}]")
    return _capi.Arg(_SCALAR_KIND[code], code, None, 0, value, 0.0)


def check_pointer(kernel_name, p, t):
    """The tilejit_arg of pointer parameter p for tensor t: its data and the
    elements from there to the end of its storage."""
    code = _DTYPES[p.dtype]
    what = f"kernel '{kernel_name}': argument '{p.name}' (pointer to " \
           f"{_NAMES[code]})"
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, not "
                        f"{type(t).__name__}")
    if t.dtype != p.dtype:
        raise TypeError(f"{what} got a {t.dtype} tensor")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what} is on {t.device}: tilejit runs on CUDA and "
                         "CPU tensors")
    size = t.element_size()
    elements = t.untyped_storage().nbytes() // size - t.storage_offset()
    return _capi.Arg(_capi.ARG_POINTER, code, t.data_ptr() or None,
                     max(elements, 0), 0, 0.0)


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
