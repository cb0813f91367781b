# prepost_library(TARGET NAME COMPONENT [DEPENDENCY...]): makes the static library TARGET (the
# one the tree's own programs link) and TARGET_shared (the same objects) the installed
# lib<NAME>.a and lib<NAME>.so, imported as prepost::<COMPONENT>_static and prepost::<COMPONENT>
# (also the names for a project that add_subdirectory()s prepost). DEPENDENCY: what the shared
# library links publicly (the static one links through TARGET's own target_link_libraries).
#
# Symbols: compiled with -fvisibility=hidden, so the shared library exports exactly what the
# public headers declare (prepost/export.h); SONAME lib<NAME>.so.<PREPOST_SOVERSION>.
# -fno-semantic-interposition keeps the exported functions inlinable inside the library, as
# they were before it was position independent.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  # before 1.0 a minor release may change the ABI
  set(PREPOST_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
else()
  set(PREPOST_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()

function(prepost_library target name component)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${name}
    EXPORT_NAME ${component}_static
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_compile_options(${target} PRIVATE $<$<C_COMPILER_ID:GNU>:-fno-semantic-interposition>)

  add_library(${target}_shared SHARED $<TARGET_OBJECTS:${target}>)
  set_target_properties(${target}_shared PROPERTIES
    OUTPUT_NAME ${name}
    EXPORT_NAME ${component}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PREPOST_SOVERSION})
  target_include_directories(${target}_shared INTERFACE
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # every symbol resolved at link time: a hidden one a library needs from another is an error here
  target_link_options(${target}_shared PRIVATE LINKER:--no-undefined)
  target_link_libraries(${target}_shared PUBLIC ${ARGN})

  add_library(prepost::${component} ALIAS ${target}_shared)
  add_library(prepost::${component}_static ALIAS ${target})

  set(export prepost-${component})
  install(TARGETS ${target} ${target}_shared EXPORT ${export}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/prepost
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT ${export} NAMESPACE prepost:: FILE ${export}-targets.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/prepost)
  set_property(GLOBAL APPEND PROPERTY PREPOST_COMPONENTS ${component})
endfunction()
