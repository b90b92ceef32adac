# lit configuration for tilejit's pass tests (`// RUN: tilejit-opt ... |
# FileCheck`, *.mlir) and command-line tests (`tilejit ...`, *.test).
import os
import shutil
import lit.formats

config.name = "tilejit"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(lit_config.params.get("tools_dir", "."), "lit-out")
path = [lit_config.params["tools_dir"], lit_config.params["llvm_tools_dir"],
        config.environment.get("PATH", "")]
config.environment["PATH"] = os.pathsep.join(path)
# A machine with an NVIDIA driver: tests of what happens without a GPU say
# `UNSUPPORTED: gpu`.
if os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi"):
    config.available_features.add("gpu")
# The kernel library that `tilejit --load` tests load (tests/plugin/).
config.substitutions.append(("%plugin", lit_config.params.get("plugin", "")))
# The same library linked with libtilejit.so (a shared build only).
if lit_config.params.get("plugin_own"):
    config.available_features.add("own-plugin")
    config.substitutions.append(("%ownplugin", lit_config.params["plugin_own"]))
