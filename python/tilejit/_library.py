"""Kernel libraries: shared libraries of a user's kernel specs, loaded into
the process's libtilejit.so (README "Kernel libraries")."""
import ctypes
import os
import subprocess
import sys

from . import _capi

# The C++ registry's accessor, tilejit::kernelRegistry(): a library that
# defines its own links a tilejit of its own and registers into that copy.
_REGISTRY_SYMBOL = "_ZN7tilejit14kernelRegistryEv"
_loaded = {}  # resolved path -> names it registered


def registered_kernels():
    """The names of the registered kernel specs, built in and loaded."""
    lib = _capi.lib()
    return [lib.tilejit_kernel_name_at(i).decode()
            for i in range(lib.tilejit_kernel_count())]


# Loads the library in a child process and prints the kernels registered
# before and after, so that a library whose registration throws (a name
# registered twice) aborts the child, not the caller.
_PREFLIGHT = r"""
import ctypes, os, sys
core = ctypes.CDLL(sys.argv[1], os.RTLD_GLOBAL)
core.tilejit_kernel_count.restype = ctypes.c_int32
core.tilejit_kernel_name_at.restype = ctypes.c_char_p
core.tilejit_kernel_name_at.argtypes = [ctypes.c_int32]
def known():
    return " ".join(core.tilejit_kernel_name_at(i).decode()
                    for i in range(core.tilejit_kernel_count()))
print(known())
lib = ctypes.CDLL(sys.argv[2], os.RTLD_GLOBAL)
fn = getattr(lib, "tilejit_register_kernels", None)
if fn is not None:
    fn.restype = None
    fn()
print(known())
"""


def _preflight(core_path, file):
    r = subprocess.run([sys.executable, "-c", _PREFLIGHT, core_path, file],
                       capture_output=True, text=True, timeout=300)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != 2:
        why = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])
        raise _capi.TilejitError(
            f"tilejit.load_library({file!r}): loading it fails: {why[-1]}")
    before, after = (line.split() for line in lines)
    return [n for n in after if n not in set(before)]


def _resolve(path):
    """The file dlopen is given, and the key of a loaded library."""
    p = os.fspath(path)
    if "/" not in p:
        # A name without a slash: a file of that name here, else the loader's
        # search (LD_LIBRARY_PATH, ...).
        return (f"./{p}", os.path.realpath(p)) if os.path.isfile(p) else (p, p)
    if not os.path.exists(p):
        raise FileNotFoundError(f"tilejit.load_library: no file {p}")
    if not os.path.isfile(p):
        raise ValueError(f"tilejit.load_library: {p} is not a file")
    return p, os.path.realpath(p)


def load_library(path):
    """Loads a kernel library and returns the names of the kernels it
    registered (tilejit.kernel compiles them).

    The library registers its specs from a static initializer or an exported
    `extern "C" void tilejit_register_kernels()`, called after the load. It
    is built against tilejit's headers alone (tilejit::headers) and resolves
    tilejit's C++ API against this process's libtilejit.so. Loading the same
    file again returns the names without loading it twice."""
    file, key = _resolve(path)
    if key in _loaded:
        return list(_loaded[key])
    core = _capi.lib()
    fresh = _preflight(core._name, file)
    where = f"tilejit.load_library({os.fspath(path)!r})"
    if not fresh:
        raise ValueError(
            f"{where}: it registered no kernel (no static initializer called "
            "tilejit::registerKernel, and it exports no "
            "tilejit_register_kernels)")
    taken = sorted(set(fresh) & set(registered_kernels()))
    if taken:
        raise ValueError(f"{where}: kernels already registered: "
                         f"{', '.join(taken)} (a library loaded before?)")
    # The library's references to tilejit's C++ API resolve in the global
    # scope: make libtilejit.so's symbols part of it.
    ctypes.CDLL(core._name, os.RTLD_GLOBAL | os.RTLD_NOLOAD)
    try:
        lib = ctypes.CDLL(file, os.RTLD_GLOBAL)
    except OSError as e:
        raise OSError(f"{where}: {e}") from e
    theirs = getattr(lib, _REGISTRY_SYMBOL, None)
    ours = getattr(core, _REGISTRY_SYMBOL)
    if theirs is not None and ctypes.cast(theirs, ctypes.c_void_p).value != \
            ctypes.cast(ours, ctypes.c_void_p).value:
        raise _capi.TilejitError(
            f"{where}: it links a tilejit of its own; build it as a MODULE "
            "against tilejit::headers (README \"Kernel libraries\")")
    fn = getattr(lib, "tilejit_register_kernels", None)
    if fn is not None:
        fn.restype, fn.argtypes = None, []
        fn()
    _loaded[key] = fresh
    return list(fresh)

