# How tilejit's libraries link MLIR/LLVM.
#  - default (development): the shared libMLIR.so / libLLVM.so from Debian.
#  - TILEJIT_STATIC=ON: the static archives, so the binaries can be carried to a
#    GPU machine that has no LLVM (see docs/static-build.md).
set(TILEJIT_MLIR_COMPONENTS
  MLIRIR MLIRSupport MLIRParser MLIRPass MLIRTransforms MLIRTransformUtils
  MLIRFuncDialect MLIRArithDialect MLIRMathDialect MLIRSCFDialect
  MLIRSCFTransforms MLIRVectorDialect MLIROptLib)

function(tilejit_link_mlir target)
  if(TILEJIT_STATIC)
    target_link_libraries(${target} PUBLIC ${TILEJIT_MLIR_COMPONENTS})
  else()
    target_link_libraries(${target} PUBLIC MLIR LLVM)
  endif()
endfunction()
