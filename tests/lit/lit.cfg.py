# lit configuration for tilejit's pass tests: `// RUN: tilejit-opt ... | FileCheck`.
import os
import lit.formats

config.name = "tilejit"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(lit_config.params.get("tools_dir", "."), "lit-out")
path = [lit_config.params["tools_dir"], lit_config.params["llvm_tools_dir"],
        config.environment.get("PATH", "")]
config.environment["PATH"] = os.pathsep.join(path)
