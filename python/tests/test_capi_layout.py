"""The ctypes structs of tilejit._capi against the C compiler's view of
include/tilejit/tilejit.h: sizeof and every field's offset."""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilejit import _capi

HEADER_DIR = Path(__file__).resolve().parents[2] / "include"


def _c_layout(tmp_path):
    lines = ["#include <stddef.h>", "#include <stdio.h>",
             "#include <tilejit/tilejit.h>", "int main(void) {"]
    for cname, struct in _capi.STRUCTS.items():
        lines.append(f'printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{cname} {field} %zu\\n", '
                         f'offsetof({cname}, {field}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([shutil.which("cc"), f"-I{HEADER_DIR}", str(src), "-o",
                    str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True,
                         text=True).stdout
    return {tuple(line.split()[:2]): int(line.split()[2])
            for line in out.splitlines()}


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)")
@pytest.mark.skipif(not (HEADER_DIR / "tilejit" / "tilejit.h").is_file(),
                    reason="not in a source checkout")
def test_structs_match_header(tmp_path):
    c = _c_layout(tmp_path)
    for cname, struct in _capi.STRUCTS.items():
        assert ctypes.sizeof(struct) == c[(cname, "sizeof")], cname
        for field, _ in struct._fields_:
            assert getattr(struct, field).offset == c[(cname, field)], \
                f"{cname}.{field}"


def test_version():
    assert _capi.version().count(".") == 2


def test_error_message():
    out = ctypes.c_void_p()
    rc = _capi.lib().tilejit_kernel_compile(b"no_such_kernel", _capi.F32,
                                            None, 0, None, None, 0, None,
                                            ctypes.byref(out))
    with pytest.raises(_capi.TilejitError, match="no_such_kernel"):
        _capi.check(rc)


def test_cublaslt_from_an_nvidia_wheel(tmp_path, monkeypatch):
    # PyTorch's CUDA wheels put cuBLASLt in site-packages/nvidia/*/lib, off
    # the loader's path: the package names it to libtilejit.so.
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcublasLt.so.13").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    monkeypatch.setenv("TILEJIT_CUBLASLT", "")
    assert _capi._wheel_library("libcublasLt.so.13") == lib / "libcublasLt.so.13"
    assert _capi._wheel_library("libnothing.so.1") is None
    _capi._name_wheel_cublaslt()
    assert os.environ["TILEJIT_CUBLASLT"] == str(lib / "libcublasLt.so.13")
    monkeypatch.setenv("TILEJIT_CUBLASLT", "/elsewhere/libcublasLt.so.13")
    _capi._name_wheel_cublaslt()  # the user's choice stays
    assert os.environ["TILEJIT_CUBLASLT"] == "/elsewhere/libcublasLt.so.13"
