# cmake --install: the CLI, the public headers, libtilejit.so and a CMake
# package (find_package(tilejit CONFIG) -> tilejit::tilejit), versioned.
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

if(TILEJIT_SHARED)
  set_target_properties(tilejit_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  target_compile_features(tilejit_shared INTERFACE cxx_std_17)
  install(TARGETS tilejit_shared EXPORT tilejitTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set(_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
  install(EXPORT tilejitTargets NAMESPACE tilejit:: DESTINATION ${_dir})
  configure_package_config_file(cmake/tilejitConfig.cmake.in
    ${PROJECT_BINARY_DIR}/tilejitConfig.cmake INSTALL_DESTINATION ${_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/tilejitConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/tilejitConfig.cmake
    ${PROJECT_BINARY_DIR}/tilejitConfigVersion.cmake DESTINATION ${_dir})
endif()
