# dynvm_add_layer(): one layer of the pipeline as an OBJECT library whose public
# headers are <layer>/include/dynvm/<layer>/*.h. Objects of all layers are archived
# together into libdynvm.a (DynvmPackage.cmake).

set_property(GLOBAL PROPERTY DYNVM_LAYER_TARGETS "")

# Header-only support code every layer may use (include/dynvm/support/).
add_library(dynvm_support INTERFACE)
target_include_directories(dynvm_support INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dynvm/support
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dynvm COMPONENT dev)

# dynvm_add_layer(<target> SOURCES ... [DEPENDS <targets>...])
function(dynvm_add_layer target)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  add_library(${target} OBJECT ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_link_libraries(${target} PUBLIC dynvm_support ${ARG_DEPENDS} PRIVATE dynvm_warnings)
  set_property(GLOBAL APPEND PROPERTY DYNVM_LAYER_TARGETS ${target})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/dynvm
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev OPTIONAL)
endfunction()
