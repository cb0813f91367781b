# The package files: prepostConfig.cmake (+ version) for find_package(prepost), and one
# pkg-config file per library: prepost.pc (the engine), prepost-sim.pc, prepost-verbs.pc.
# Both are relocatable (paths relative to where they are installed), so `cmake --install
# --prefix DIR` gives a working package in DIR.
include(CMakePackageConfigHelpers)

get_property(PREPOST_COMPONENTS GLOBAL PROPERTY PREPOST_COMPONENTS)
set(PREPOST_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/prepost)
configure_package_config_file(cmake/prepostConfig.cmake.in
  ${PROJECT_BINARY_DIR}/prepostConfig.cmake INSTALL_DESTINATION ${PREPOST_CMAKE_DIR} PATH_VARS CMAKE_INSTALL_DATADIR)
# 0.x: a minor release may break compatibility
write_basic_package_version_file(${PROJECT_BINARY_DIR}/prepostConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/prepostConfig.cmake
              ${PROJECT_BINARY_DIR}/prepostConfigVersion.cmake
        DESTINATION ${PREPOST_CMAKE_DIR})

# ${pcfiledir}/<this> is the installation prefix
set(pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH PREPOST_PC_PREFIX /${pcdir} /)
string(REGEX REPLACE "/$" "" PREPOST_PC_PREFIX "${PREPOST_PC_PREFIX}")
foreach(pc IN LISTS PREPOST_COMPONENTS)
  configure_file(cmake/prepost-${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/prepost-${pc}.pc @ONLY)
endforeach()
file(RENAME ${PROJECT_BINARY_DIR}/pkgconfig/prepost-engine.pc
            ${PROJECT_BINARY_DIR}/pkgconfig/prepost.pc)
install(DIRECTORY ${PROJECT_BINARY_DIR}/pkgconfig/ DESTINATION ${pcdir})
