"""ctypes declarations of tilejit's C ABI (include/tilejit/tilejit.h).

Field order and types follow the header exactly; tests/test_capi_layout.py
compares every struct's size and field offsets with a C program compiled
against the header.
"""
import ctypes
import os
import sys
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint32, c_void_p)
from pathlib import Path

# tilejit_dtype
I1, I32, I64, BF16, F16, F32 = range(6)
# tilejit_arg_kind
ARG_POINTER, ARG_I32, ARG_I64, ARG_F32 = range(4)
# tilejit_device
DEVICE_GPU, DEVICE_CPU = 0, 1
# tilejit_reduction
REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM = range(3)
KL_FORWARD, KL_REVERSE, JSD, JSD_LOGITS = range(4)
# tilejit_gemm_backend
GEMM_CUBLASLT, GEMM_TILEJIT, GEMM_AUTO = range(3)
# tilejit_kernel_compile_flags
COMPILE_TUNED = 1


class Arg(Structure):
    """tilejit_arg"""
    _fields_ = [("kind", c_int32), ("dtype", c_int32), ("ptr", c_void_p),
                ("num_elements", c_int64), ("i", c_int64), ("f", c_float)]


class KernelUsage(Structure):
    """tilejit_kernel_usage"""
    _fields_ = [("threads", c_int32), ("registers", c_int32),
                ("static_shared_bytes", c_int32),
                ("dynamic_shared_bytes", c_int32)]


class CeTvdReducedArgs(Structure):
    """tilejit_ce_tvd_reduced_args"""
    _fields_ = [("dtype", c_int32), ("bt", c_int64), ("v", c_int64),
                ("student", c_void_p), ("teacher", c_void_p),
                ("row_stride", c_int64), ("teacher_stride", c_int64),
                ("target", c_void_p), ("grad", c_void_p),
                ("grad_stride", c_int64), ("loss", c_void_p),
                ("ce", c_void_p), ("tvd", c_void_p),
                ("bad_target", c_void_p), ("ignore_index", c_int64),
                ("alpha", c_double), ("beta", c_double), ("mean", c_int32),
                ("set", POINTER(c_char_p)), ("n_set", c_size_t)]


class CeTvdArgs(Structure):
    """tilejit_ce_tvd_args"""
    _fields_ = [("dtype", c_int32), ("bt", c_int64), ("v", c_int64),
                ("student", c_void_p), ("teacher", c_void_p),
                ("row_stride", c_int64), ("teacher_stride", c_int64),
                ("target", c_void_p), ("ignore_index", c_int64),
                ("forward_kernel", c_char_p), ("set", POINTER(c_char_p)),
                ("n_set", c_size_t)]


class LinearCeArgs(Structure):
    """tilejit_linear_ce_args"""
    _fields_ = [("dtype", c_int32), ("n", c_int64), ("d", c_int64),
                ("v", c_int64), ("input", c_void_p), ("input_stride", c_int64),
                ("weight", c_void_p), ("weight_stride", c_int64),
                ("bias", c_void_p), ("target", c_void_p),
                ("class_weight", c_void_p), ("grad_output", c_void_p),
                ("ignore_index", c_int64), ("label_smoothing", c_double),
                ("z_loss", c_double), ("softcap", c_double),
                ("reduction", c_int32), ("loss", c_void_p),
                ("row_loss", c_void_p), ("row_z_loss", c_void_p),
                ("lse", c_void_p), ("grad_input", c_void_p),
                ("grad_input_stride", c_int64), ("grad_weight", c_void_p),
                ("grad_bias", c_void_p), ("bad_target", c_void_p),
                ("chunk_rows", c_int64), ("memory_budget_bytes", c_int64),
                ("gemm_workspace_bytes", c_int64), ("narrow_logits", c_int32),
                ("bf16_grad_accumulation", c_int32), ("gemm_backend", c_int32),
                ("set", POINTER(c_char_p)), ("n_set", c_size_t)]


class CrossEntropyArgs(Structure):
    """tilejit_cross_entropy_args"""
    _fields_ = [("dtype", c_int32), ("bt", c_int64), ("v", c_int64),
                ("logits", c_void_p), ("grad", c_void_p),
                ("target", c_void_p), ("class_weight", c_void_p),
                ("grad_output", c_void_p), ("ignore_index", c_int64),
                ("label_smoothing", c_double), ("z_loss", c_double),
                ("softcap", c_double), ("reduction", c_int32),
                ("loss", c_void_p), ("row_loss", c_void_p),
                ("row_z_loss", c_void_p), ("bad_target", c_void_p),
                ("grad_scale", c_double)]


class DistillationArgs(Structure):
    """tilejit_distillation_args"""
    _fields_ = [("divergence", c_int32), ("dtype", c_int32), ("bt", c_int64),
                ("v", c_int64), ("student", c_void_p), ("teacher", c_void_p),
                ("grad", c_void_p), ("label", c_void_p),
                ("ignore_index", c_int64), ("temperature", c_double),
                ("beta", c_double), ("reduction", c_int32),
                ("grad_output", c_void_p), ("loss", c_void_p),
                ("row_loss", c_void_p)]


STRUCTS = {"tilejit_arg": Arg, "tilejit_kernel_usage": KernelUsage,
           "tilejit_ce_tvd_reduced_args": CeTvdReducedArgs,
           "tilejit_ce_tvd_args": CeTvdArgs,
           "tilejit_linear_ce_args": LinearCeArgs,
           "tilejit_cross_entropy_args": CrossEntropyArgs,
           "tilejit_distillation_args": DistillationArgs}

_R = POINTER(CeTvdReducedArgs)
_U = POINTER(CeTvdArgs)
_L = POINTER(LinearCeArgs)
_X = POINTER(CrossEntropyArgs)
_D = POINTER(DistillationArgs)
_PROTOTYPES = {
    "tilejit_version": (c_char_p, []),
    "tilejit_kernel_count": (ctypes.c_int32, []),
    "tilejit_kernel_name_at": (c_char_p, [ctypes.c_int32]),
    "tilejit_last_error": (c_char_p, []),
    "tilejit_kernel_compile": (c_int, [c_char_p, c_int32, POINTER(c_char_p),
                                       c_size_t, POINTER(c_char_p),
                                       POINTER(c_int64), c_size_t, c_char_p,
                                       POINTER(c_void_p)]),
    "tilejit_kernel_compile_flags": (
        c_int, [c_char_p, c_int32, POINTER(c_char_p), c_size_t,
                POINTER(c_char_p), POINTER(c_int64), c_size_t, c_char_p,
                c_uint32, POINTER(c_void_p)]),
    "tilejit_kernel_tune": (
        c_int, [c_char_p, c_int32, POINTER(c_char_p), POINTER(c_int64),
                c_size_t, POINTER(c_char_p), c_size_t, c_int32, c_int32,
                c_char_p, c_size_t]),
    "tilejit_kernel_destroy": (None, [c_void_p]),
    "tilejit_kernel_name": (c_char_p, [c_void_p]),
    "tilejit_kernel_config": (c_char_p, [c_void_p]),
    "tilejit_kernel_config_source": (c_char_p, [c_void_p]),
    "tilejit_kernel_num_params": (c_int32, [c_void_p]),
    "tilejit_kernel_param": (c_int, [c_void_p, c_int32, POINTER(c_char_p),
                                     POINTER(c_int32), POINTER(c_int32)]),
    "tilejit_kernel_run_cpu": (c_int, [c_void_p, POINTER(c_int64),
                                       POINTER(Arg), c_size_t]),
    "tilejit_kernel_compile_gpu": (c_int, [c_void_p]),
    "tilejit_kernel_resources": (c_int, [c_void_p, POINTER(KernelUsage)]),
    "tilejit_kernel_launch": (c_int, [c_void_p, POINTER(c_int64),
                                      POINTER(Arg), c_size_t, c_void_p]),
    "tilejit_ce_tvd_reduced_workspace_bytes": (c_int, [_R, POINTER(c_size_t)]),
    "tilejit_ce_tvd_reduced_prepare": (c_int, [_R, c_char_p, c_size_t]),
    "tilejit_ce_tvd_reduced": (c_int, [_R, c_void_p, c_size_t, c_int32,
                                       c_void_p]),
    "tilejit_ce_tvd_state_bytes": (c_size_t, [c_int64]),
    "tilejit_ce_tvd_prepare": (c_int, [_U]),
    "tilejit_ce_tvd_forward": (c_int, [_U, c_void_p, c_void_p, c_void_p,
                                       c_int32, c_void_p]),
    "tilejit_ce_tvd_backward": (c_int, [_U, c_void_p, c_void_p, c_void_p,
                                        c_void_p, c_int64, c_int32, c_void_p]),
    "tilejit_linear_ce_workspace_bytes": (c_int, [_L, c_int32,
                                                  POINTER(c_size_t)]),
    "tilejit_linear_ce_prepare": (c_int, [_L, c_void_p, c_size_t, c_int32,
                                          c_int32, c_void_p, POINTER(c_int64)]),
    "tilejit_linear_ce": (c_int, [_L, c_void_p, c_size_t, c_int32, c_void_p]),
    "tilejit_cross_entropy_workspace_bytes": (c_int, [_X, POINTER(c_size_t)]),
    "tilejit_cross_entropy_prepare": (c_int, [_X, c_int32]),
    "tilejit_cross_entropy": (c_int, [_X, c_void_p, c_size_t, c_int32,
                                      c_void_p]),
    "tilejit_distillation_workspace_bytes": (c_int, [_D, POINTER(c_size_t)]),
    "tilejit_distillation_prepare": (c_int, [_D, c_int32]),
    "tilejit_distillation": (c_int, [_D, c_void_p, c_size_t, c_int32,
                                     c_void_p]),
}

_PACKAGE_DIR = Path(__file__).resolve().parent
_NAME = "libtilejit.so"


def candidates():
    """Where libtilejit.so is looked for, in order: $TILEJIT_LIBRARY, the
    package directory, then the build tree of a source checkout."""
    env = os.environ.get("TILEJIT_LIBRARY")
    if env:
        return [Path(env)]
    return [_PACKAGE_DIR / _NAME,
            _PACKAGE_DIR.parent.parent / "build" / "ops" / _NAME]


# What libtilejit.so needs from CUDA besides the driver: NVRTC 13 (linked)
# and cuBLASLt 13 (dlopen'ed for the linear CE's GEMMs: $TILEJIT_CUBLASLT,
# else by soname). PyTorch's CUDA wheels bring both as nvidia-* packages,
# whose lib directories are not on the loader's path.
def _wheel_library(soname):
    """soname's path in an installed nvidia-* wheel (nvidia/*/lib), or None."""
    for entry in sys.path:
        root = Path(entry) / "nvidia"
        if entry and root.is_dir():  # "" (the current directory) is not
            for found in sorted(root.glob(f"*/lib/{soname}")):
                return found
    return None


def _name_wheel_cublaslt():
    """$TILEJIT_CUBLASLT, unless the user set it: the nvidia-* wheel's
    cuBLASLt where one is installed (the copy PyTorch itself loads)."""
    if not os.environ.get("TILEJIT_CUBLASLT"):
        cublas_lt = _wheel_library("libcublasLt.so.13")
        if cublas_lt:
            os.environ["TILEJIT_CUBLASLT"] = str(cublas_lt)


def _open(path):
    """path loaded; NVRTC from an nvidia-* wheel when the loader (with
    libtilejit.so's RUNPATH: the toolkit's places) finds none."""
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        nvrtc = _wheel_library("libnvrtc.so.13") if "nvrtc" in str(e) else None
        if nvrtc is None:
            hint = ""
            if "nvrtc" in str(e):
                hint = (" libtilejit.so needs NVRTC 13 (libnvrtc.so.13),"
                        " found neither by the loader nor in an nvidia-*"
                        " wheel: install the CUDA 13 toolkit or"
                        " `pip install nvidia-cuda-nvrtc`.")
            raise OSError(f"tilejit: cannot load {path}: {e}.{hint}") from e
    ctypes.CDLL(str(nvrtc), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(path))


def _load():
    _name_wheel_cublaslt()
    tried = candidates()
    for path in tried:
        if not path.is_file():
            continue
        lib = _open(path)
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise OSError(
                    f"tilejit: {path} has no {name}: it is another version "
                    "of libtilejit.so than this package's; rebuild it or "
                    "point TILEJIT_LIBRARY at a matching one") from None
            fn.restype, fn.argtypes = restype, argtypes
        return lib
    where = ", ".join(str(p) for p in tried)
    raise OSError(
        f"tilejit: libtilejit.so not found (tried {where}). Install the wheel"
        " built by `pip install .` at the repository root, or set"
        " TILEJIT_LIBRARY to the path of a libtilejit.so (build/ops/ of a"
        " CMake build).")


_lib = None


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


class TilejitError(RuntimeError):
    """A failed call of the C ABI, with tilejit_last_error()'s message."""


def check(rc):
    if rc != 0:
        msg = lib().tilejit_last_error().decode(errors="replace")
        raise TilejitError(msg or f"tilejit call failed ({rc})")


def string_array(strings):
    """(char**, n) for "NAME=VALUE" lists; keep the array alive while used."""
    strings = list(strings or ())
    if not strings:
        return None, 0
    arr = (c_char_p * len(strings))(*(s.encode() for s in strings))
    return ctypes.cast(arr, POINTER(c_char_p)), len(strings)


def version():
    return lib().tilejit_version().decode()
