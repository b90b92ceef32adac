# How tilejit's libraries link MLIR/LLVM.
#  - default (development): the shared libMLIR.so / libLLVM.so from Debian.
#  - TILEJIT_STATIC=ON: the static archives, so the binaries can be carried to a
#    GPU machine that has no LLVM (see docs/static-build.md).
#
# Every library that uses MLIR calls tilejit_link_mlir(<target>); executables
# get MLIR only through such libraries, so nothing else needs to know which
# mode is on. Included from the top-level CMakeLists.txt after
# find_package(MLIR) and find_package(spdlog), before any target is created.
set(TILEJIT_MLIR_COMPONENTS
  MLIRIR MLIRSupport MLIRParser MLIRPass MLIRTransforms MLIRTransformUtils
  MLIRFuncDialect MLIRArithDialect MLIRMathDialect MLIRSCFDialect
  MLIRSCFTransforms MLIRVectorDialect MLIROptLib)

# LLVM components that stand in for libLLVM.so in a static build. Unused
# archive members are never pulled in, so extra components cost link time
# only, not size (NVPTX is here for MLIR's gpu -> nvvm -> PTX path).
set(TILEJIT_LLVM_COMPONENTS
  Core Support Demangle Analysis TransformUtils Passes IPO Target TargetParser
  MC BitReader BitWriter IRReader AsmParser Linker Object FrontendOpenMP
  FrontendOffloading NVPTXCodeGen NVPTXDesc NVPTXInfo)

# --- Linker: lld when available, in both modes (3-7x faster than GNU ld here) -
# -fuse-ld=lld makes gcc run the `ld.lld` on PATH (Debian: package lld-22).
include(CheckLinkerFlag)
check_linker_flag(CXX "-fuse-ld=lld" TILEJIT_HAVE_LLD)
if(TILEJIT_HAVE_LLD)
  set(_tilejit_lld_default ON)
else()
  set(_tilejit_lld_default OFF)
endif()
option(TILEJIT_USE_LLD "Link with lld (-fuse-ld=lld)" ${_tilejit_lld_default})
if(TILEJIT_USE_LLD)
  foreach(_kind EXE SHARED MODULE)
    string(APPEND CMAKE_${_kind}_LINKER_FLAGS " -fuse-ld=lld")
  endforeach()
  message(STATUS "tilejit: linking with lld")
endif()

if(TILEJIT_STATIC)
  message(STATUS "tilejit: static MLIR/LLVM build (TILEJIT_STATIC=ON)")
  # Nothing may fall back to the dylibs (mlir_target_link_libraries,
  # llvm_config, add_llvm_executable all look at these).
  set(LLVM_LINK_LLVM_DYLIB OFF)
  set(MLIR_LINK_MLIR_DYLIB OFF)

  # 1. An interface target that stands in for the `LLVM` dylib.
  llvm_map_components_to_libnames(_tilejit_llvm_libs ${TILEJIT_LLVM_COMPONENTS})
  add_library(tilejit_llvm_static INTERFACE)
  target_link_libraries(tilejit_llvm_static INTERFACE ${_tilejit_llvm_libs})

  # 2. Every exported MLIR target names `LLVM` (libLLVM.so) in its link
  #    interface (Debian builds with LLVM_LINK_LLVM_DYLIB=ON): re-point it.
  foreach(_t IN LISTS MLIR_EXPORTED_TARGETS)
    if(NOT TARGET ${_t})
      continue()
    endif()
    get_target_property(_type ${_t} TYPE)
    if(NOT _type STREQUAL "STATIC_LIBRARY" AND NOT _type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    get_target_property(_libs ${_t} INTERFACE_LINK_LIBRARIES)
    if(NOT _libs)
      continue()
    endif()
    list(TRANSFORM _libs REPLACE "^LLVM$" "tilejit_llvm_static")
    list(TRANSFORM _libs REPLACE "^\\$<LINK_ONLY:LLVM>$"
                                 "$<LINK_ONLY:tilejit_llvm_static>")
    set_target_properties(${_t} PROPERTIES INTERFACE_LINK_LIBRARIES "${_libs}")
  endforeach()

  # 3. LLVMSupport: static zlib/zstd instead of the shared ones, no libz3
  #    (only LLVM's Z3 constraint solver uses it; MLIR never does).
  find_library(TILEJIT_ZLIB_STATIC NAMES libz.a REQUIRED)
  find_library(TILEJIT_ZSTD_STATIC NAMES libzstd.a REQUIRED)
  get_target_property(_libs LLVMSupport INTERFACE_LINK_LIBRARIES)
  list(FILTER _libs EXCLUDE REGEX "libz3")
  list(TRANSFORM _libs REPLACE "^ZLIB::ZLIB$" "${TILEJIT_ZLIB_STATIC}")
  list(TRANSFORM _libs REPLACE "^zstd::libzstd_(shared|static)$"
                               "${TILEJIT_ZSTD_STATIC}")
  set_target_properties(LLVMSupport PROPERTIES INTERFACE_LINK_LIBRARIES "${_libs}")

  # 4. spdlog: Debian ships only libspdlog.so, and its targets link libfmt.so.
  #    Use both header-only: fmt::fmt -> fmt::fmt-header-only, and no
  #    SPDLOG_COMPILED_LIB/SPDLOG_SHARED_LIB so nothing references
  #    libspdlog.so (--as-needed below then drops it from the binary).
  foreach(_t spdlog::spdlog spdlog::spdlog_header_only)
    if(TARGET ${_t})
      get_target_property(_libs ${_t} INTERFACE_LINK_LIBRARIES)
      list(TRANSFORM _libs REPLACE "^fmt::fmt$" "fmt::fmt-header-only")
      set_target_properties(${_t} PROPERTIES
        INTERFACE_LINK_LIBRARIES "${_libs}"
        INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL")
    endif()
  endforeach()

  # 5. Toolchain runtime: libstdc++/libgcc static; glibc, libnvrtc.so.13 stay
  #    dynamic (libcuda is dlopen'ed). Dead sections of our code and of the
  #    archives are dropped. Applies to every executable of the project.
  add_compile_options(-ffunction-sections -fdata-sections)
  string(APPEND CMAKE_EXE_LINKER_FLAGS
         " -static-libstdc++ -static-libgcc -Wl,--gc-sections -Wl,--as-needed")
  # libnvrtc.so.13: besides this machine's CUDA directory (CMake adds it),
  # look where a standard CUDA install keeps it on the target machine.
  list(APPEND CMAKE_BUILD_RPATH /usr/local/cuda/lib64
       /usr/local/cuda/targets/x86_64-linux/lib)
endif()

function(tilejit_link_mlir target)
  if(TILEJIT_STATIC)
    target_link_libraries(${target} PUBLIC ${TILEJIT_MLIR_COMPONENTS})
  else()
    target_link_libraries(${target} PUBLIC MLIR LLVM)
  endif()
endfunction()
