"""tilejit from Python: registered kernels compiled and launched on torch
tensors (tilejit.kernel), kernel libraries (tilejit.load_library), the C ABI
through ctypes (tilejit._capi) and the losses as PyTorch operators
(tilejit.torch)."""
from ._capi import TilejitError, version
from ._library import load_library, registered_kernels

__version__ = "0.1.0"
__all__ = ["TilejitError", "version", "__version__", "load_library",
           "registered_kernels", "kernel", "Kernel", "Param", "tune"]


def __getattr__(name):
    # torch is imported on first use of the kernel API, not by `import tilejit`.
    if name in ("kernel", "Kernel", "Param", "tune"):
        from . import _kernel
        return getattr(_kernel, name)
    raise AttributeError(f"module 'tilejit' has no attribute {name!r}")
