"""tilejit from Python: the C ABI through ctypes (tilejit._capi) and the
losses as PyTorch operators (tilejit.torch)."""
from ._capi import TilejitError, version

__version__ = "0.1.0"
__all__ = ["TilejitError", "version", "__version__"]
