# cmake --install: the CLI, the public headers, libtilejit.so, the static
# archive libtilejit.a and a CMake package (find_package(tilejit CONFIG) ->
# tilejit::tilejit, tilejit::tilejit_static, tilejit::headers), versioned.
# Included from the top-level CMakeLists.txt after every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed binaries keep finding libMLIR/libnvrtc where they were linked
# from (a dynamic build), and libtilejit.so beside them.
set_target_properties(tilejit PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS tilejit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public API: no header that includes MLIR (ir/, compiler/, codegen/) or
# spdlog (Log.h).
install(DIRECTORY include/tilejit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h"
  PATTERN "ir" EXCLUDE PATTERN "compiler" EXCLUDE PATTERN "codegen" EXCLUDE
  PATTERN "Log.h" EXCLUDE)

# The Python wheel (pyproject.toml: install.components = python) takes
# libtilejit.so alone, into the package directory tilejit/, under its
# unversioned name (wheels have no symbolic links).
if(TILEJIT_SHARED AND SKBUILD)
  # Installed as a file, so built with its final RUNPATH: where a CUDA
  # toolkit keeps NVRTC (the package loads it from an nvidia-* wheel
  # otherwise), no build-tree entries and no padding (an empty entry would
  # search the current directory).
  set_target_properties(tilejit_shared PROPERTIES BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "/usr/local/cuda/lib64;/usr/local/cuda/targets/x86_64-linux/lib")
  install(FILES $<TARGET_FILE:tilejit_shared> DESTINATION tilejit
    RENAME libtilejit.so COMPONENT python)
endif()

if(TILEJIT_SHARED)
  set_target_properties(tilejit_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  target_compile_features(tilejit_shared INTERFACE cxx_std_17)
  install(TARGETS tilejit_shared EXPORT tilejitTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(TARGETS tilejit_headers EXPORT tilejitTargets)
  set(_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
  install(EXPORT tilejitTargets NAMESPACE tilejit:: DESTINATION ${_dir})
  configure_package_config_file(cmake/tilejitConfig.cmake.in
    ${PROJECT_BINARY_DIR}/tilejitConfig.cmake INSTALL_DESTINATION ${_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/tilejitConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/tilejitConfig.cmake
    ${PROJECT_BINARY_DIR}/tilejitConfigVersion.cmake DESTINATION ${_dir})
endif()

# libtilejit.a: every tilejit archive in one, for C++ users who link
# statically (tilejit::tilejit_static). What the archives need beyond
# themselves (MLIR/LLVM, spdlog, fmt, NVRTC) comes from where this build found
# it. A TILEJIT_STATIC build's archives need MLIR's static libraries, which
# are not installed with it: no static package there.
if(TILEJIT_SHARED AND NOT TILEJIT_STATIC)
  set(_archive ${PROJECT_BINARY_DIR}/libtilejit.a)
  set(_mri "create ${_archive}\n")
  foreach(_a IN LISTS TILEJIT_ARCHIVES)
    string(APPEND _mri "addlib $<TARGET_FILE:${_a}>\n")
  endforeach()
  string(APPEND _mri "save\nend\n")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/libtilejit.mri CONTENT "${_mri}")
  set(_deps)
  foreach(_a IN LISTS TILEJIT_ARCHIVES)
    list(APPEND _deps $<TARGET_FILE:${_a}>)
  endforeach()
  add_custom_command(OUTPUT ${_archive}
    COMMAND ${CMAKE_COMMAND} -E rm -f ${_archive}
    COMMAND sh -c "${CMAKE_AR} -M < ${PROJECT_BINARY_DIR}/libtilejit.mri"
    DEPENDS ${_deps} ${PROJECT_BINARY_DIR}/libtilejit.mri
    COMMENT "Merging tilejit's archives into libtilejit.a" VERBATIM)
  add_custom_target(tilejit_static_archive ALL DEPENDS ${_archive})
  install(FILES ${_archive} DESTINATION ${CMAKE_INSTALL_LIBDIR})
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/tilejitStaticTargets.cmake
    CONTENT "# tilejit::tilejit_static: libtilejit.a and what it links.
get_filename_component(_prefix \"\${CMAKE_CURRENT_LIST_DIR}/../../..\" ABSOLUTE)
add_library(tilejit::tilejit_static STATIC IMPORTED)
set_target_properties(tilejit::tilejit_static PROPERTIES
  IMPORTED_LOCATION \"\${_prefix}/${CMAKE_INSTALL_LIBDIR}/libtilejit.a\"
  INTERFACE_INCLUDE_DIRECTORIES \"\${_prefix}/${CMAKE_INSTALL_INCLUDEDIR}\"
  INTERFACE_COMPILE_FEATURES cxx_std_17
  INTERFACE_LINK_LIBRARIES \"$<TARGET_LINKER_FILE:MLIR>;$<TARGET_LINKER_FILE:LLVM>;$<TARGET_LINKER_FILE:spdlog::spdlog>;$<TARGET_LINKER_FILE:fmt::fmt>;$<TARGET_LINKER_FILE:CUDA::nvrtc>;${CMAKE_DL_LIBS};pthread\")
")
  install(FILES ${PROJECT_BINARY_DIR}/tilejitStaticTargets.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
endif()
