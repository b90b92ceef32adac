"""tilejit.load_library: the in-tree kernel library tests/plugin (built
beside libtilejit.so in a CMake build) and the errors of a bad library."""
import ctypes.util
from pathlib import Path

import pytest
import torch

import tilejit
from tilejit import _capi


def built(name):
    """tests/<name> of the build tree holding the loaded libtilejit.so."""
    path = Path(_capi.lib()._name).resolve().parent.parent / "tests" / name
    if not path.is_file():
        pytest.skip(f"{path} not built")
    return path


@pytest.fixture(scope="module")
def plugin():
    return tilejit.load_library(built("libtilejit-test-plugin.so"))


def test_plugin_registers_both_ways(plugin):
    # One spec from a static initializer, one from tilejit_register_kernels.
    assert plugin == ["plugin_scale", "plugin_scale_again"]
    assert set(plugin) <= set(tilejit.registered_kernels())
    assert tilejit.load_library(built("libtilejit-test-plugin.so")) == plugin


@pytest.mark.parametrize("name", ["plugin_scale", "plugin_scale_again"])
def test_plugin_kernel_runs(plugin, name):
    k = tilejit.kernel(name, torch.float32, BLOCK_SIZE=128)
    assert [p.name for p in k.params] == ["x", "y", "a", "N"]
    x = torch.randn(3, 200)
    y = torch.full_like(x, float("nan"))
    k[x.size(0)](x, y, 2.5, x.size(1))
    torch.testing.assert_close(y, 2.5 * x)


def test_same_names_again_is_refused(plugin):
    # The same specs from another file: registering them would throw inside
    # the loader.
    with pytest.raises(ValueError, match="already registered: plugin_scale"):
        tilejit.load_library(built("libtilejit-test-plugin-own.so"))


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no file /nonexistent/x.so"):
        tilejit.load_library("/nonexistent/x.so")


def test_not_a_library(tmp_path):
    bad = tmp_path / "bad.so"
    bad.write_text("not ELF")
    with pytest.raises(tilejit.TilejitError, match="loading it fails"):
        tilejit.load_library(bad)


def test_library_without_kernels():
    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load")
    with pytest.raises(ValueError, match="registered no kernel"):
        tilejit.load_library(libm)
