# `cmake --install`: headers, libraries, the `kiln` CLI, kiln_rt and a CMake package, so that
# another project can write
#
#   find_package(kiln REQUIRED)
#   target_link_libraries(app PRIVATE kiln::kiln)   # or kiln::eager, kiln::rt
#
# (docs/examples/consumer/ is such a project; ctest builds it against an installed prefix and
# as a subdirectory.) The package finds the same dependencies kiln was built with.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(kiln_eager PROPERTIES EXPORT_NAME eager)
set_target_properties(kiln_rt PROPERTIES EXPORT_NAME rt)
set_target_properties(kiln_distributed PROPERTIES EXPORT_NAME distributed)
set(KILN_INSTALLED_TARGETS kiln kiln_eager kiln_distributed kiln_runtime kiln_ir kiln_passes kiln_backends
    kiln_interp kiln_cpu_kernels kiln_cpu_gemm kiln_cpu_exec kiln_cuda kiln_cuda_exec kiln_artifact
    kiln_rt)
if(KILN_COMPILER)
  list(APPEND KILN_INSTALLED_TARGETS kiln_compiler kiln_codegen_common kiln_cpu_codegen kiln_cpu_compiler
       kiln_cuda_codegen kiln_cuda_compiler kiln_cli)
endif()
install(TARGETS ${KILN_INSTALLED_TARGETS} EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public headers, one include tree. The code generator's and the GEMM's own headers stay
# out: nothing public includes them.
set(KILN_PUBLIC_INCLUDE_DIRS runtime/include ir/include passes/include backends/include
    backends/interp/include backends/cpu/kernels/include backends/cuda/include
    frontend/artifact/include frontend/rt/include frontend/include)
if(KILN_COMPILER)
  # The cpu backend's CompiledGraph (kiln/cpu/compiler/cpu_backend.h) is a cpu::exec::GraphRunner;
  # the cuda backend's a cuda::exec::GraphRunner over a codegen::PtxModule.
  list(APPEND KILN_PUBLIC_INCLUDE_DIRS backends/cpu/compiler/include backends/cpu/exec/include
       backends/cuda/compiler/include backends/cuda/exec/include backends/cuda/codegen/include)
endif()
foreach(dir ${KILN_PUBLIC_INCLUDE_DIRS})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/frontend/include/kiln/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)

set(KILN_CONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CONFIG_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${KILN_CONFIG_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${KILN_CONFIG_DIR})
