# SPDX-License-Identifier: MIT
# What `cmake --install` adds beyond the tools, the library and the kernels (docs/setup.md, "Install"): the CMake
# package mori_symm (target mori::symm), mori_symm.pc, the CI scripts with the modules they import, the JSON
# schemas, the example; and the Debian package CPack makes of all of it. Included from the top CMakeLists.txt.
include(CMakePackageConfigHelpers)

set(MORI_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mori_symm)
install(EXPORT mori_symm_targets NAMESPACE mori:: FILE mori_symmTargets.cmake DESTINATION ${MORI_CMAKE_DIR})
configure_package_config_file(cmake/mori_symmConfig.cmake.in ${CMAKE_BINARY_DIR}/mori_symmConfig.cmake
  INSTALL_DESTINATION ${MORI_CMAKE_DIR})
# Before 1.0 a minor version may break the API (CHANGELOG.md): only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/mori_symmConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/mori_symmConfig.cmake ${CMAKE_BINARY_DIR}/mori_symmConfigVersion.cmake
  DESTINATION ${MORI_CMAKE_DIR})

# pkg-config: spdlog, fmt and nlohmann_json by their own .pc files; MPI by the flags FindMPI found (Open MPI and
# MPICH name their .pc files differently), its headers as system headers, as CMake's MPI::MPI_CXX has them.
set(MORI_PC_MPI_CFLAGS "")
foreach(dir ${MPI_CXX_INCLUDE_DIRS})
  string(APPEND MORI_PC_MPI_CFLAGS " -isystem ${dir}")
endforeach()
set(MORI_PC_MPI_LIBS "")
foreach(lib ${MPI_CXX_LIBRARIES})
  string(APPEND MORI_PC_MPI_LIBS " ${lib}")
endforeach()
file(RELATIVE_PATH MORI_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" MORI_PC_TO_PREFIX "${MORI_PC_TO_PREFIX}")
configure_file(cmake/mori_symm.pc.in ${CMAKE_BINARY_DIR}/mori_symm.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/mori_symm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CI scripts and what they import, in share/mori/scripts/ beside share/mori/results/schema/ and
# share/mori/results/expectations/ (the layout of the source tree, so the scripts find both as they do there);
# bin/mori-<script> links to each. The developer's scripts (build, test, deps, run-main, a2a-row, the AMD chroot
# and toolchain) stay out.
set(MORI_SCRIPTS_DIR ${CMAKE_INSTALL_DATADIR}/mori/scripts)
install(DIRECTORY scripts/ DESTINATION ${MORI_SCRIPTS_DIR} USE_SOURCE_PERMISSIONS
  PATTERN __pycache__ EXCLUDE PATTERN amd-* EXCLUDE PATTERN build EXCLUDE PATTERN deps EXCLUDE
  PATTERN test EXCLUDE PATTERN run-main EXCLUDE PATTERN a2a-row EXCLUDE)
install(DIRECTORY results/schema results/expectations DESTINATION ${CMAKE_INSTALL_DATADIR}/mori/results)
file(RELATIVE_PATH _mori_bin_to_scripts ${CMAKE_INSTALL_FULL_BINDIR}
  ${CMAKE_INSTALL_FULL_DATADIR}/mori/scripts)
set(MORI_SCRIPT_LINKS perf-check validate-json render-results evidence compare faults matrix-sweep scale-sweep
  check-results)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/script-links)
foreach(script ${MORI_SCRIPT_LINKS})
  file(CREATE_LINK ${_mori_bin_to_scripts}/${script} ${CMAKE_BINARY_DIR}/script-links/mori-${script} SYMBOLIC)
  install(FILES ${CMAKE_BINARY_DIR}/script-links/mori-${script} DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()

# The example a user builds against the installed library (examples/README.md).
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mori/examples)

# The Debian package: `cpack -G DEB` in the build folder (docs/setup.md, "Install"). Depends from the libraries
# the binaries link (dpkg-shlibdeps: MPI, spdlog, fmt, the C++ runtime); the GPU libraries (libcuda, NVRTC,
# hiprtc) are loaded at run time and are no dependency. The headers and the CMake package need the -dev packages
# of MPI, spdlog, fmt and nlohmann_json: recommended, since the tools run without them.
set(CPACK_PACKAGE_NAME mori-symm)
set(CPACK_PACKAGE_VENDOR "the mori symmetric-memory tools authors")
set(CPACK_PACKAGE_CONTACT "the mori symmetric-memory tools authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "symmetric-memory tools: mori-probe, mori-a2a, mori-teardown-repro and their library")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Stripped binaries (the build folder keeps the debug information of a RelWithDebInfo build).
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# ldconfig runs after install and removal, so that programs find libmori_symm.so.0.2 by its soname.
configure_file(cmake/deb-triggers ${CMAKE_BINARY_DIR}/deb-control/triggers COPYONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb-control/triggers)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
  "openmpi-bin | mpich, python3-jsonschema, libopenmpi-dev | libmpich-dev, libspdlog-dev, libfmt-dev, \
nlohmann-json3-dev")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-matplotlib")
set(CPACK_GENERATOR DEB)
include(CPack)
