# libdynvm.a (all layers' objects in one archive) and the CMake package that lets an
# embedding project say find_package(dynvm) and link dynvm::dynvm.
include(CMakePackageConfigHelpers)

get_property(_layers GLOBAL PROPERTY DYNVM_LAYER_TARGETS)
set(_objects "")
foreach(_layer ${_layers})
  list(APPEND _objects $<TARGET_OBJECTS:${_layer}>)
endforeach()
add_library(dynvm STATIC ${_objects})
add_library(dynvm::dynvm ALIAS dynvm)
target_include_directories(dynvm PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# What the objects need at link time; dynvmConfig.cmake finds the same packages.
target_link_libraries(dynvm INTERFACE
  $<BUILD_INTERFACE:dynvm_runtime>
  $<INSTALL_INTERFACE:Python3::Python>)
set(_dynvm_link_extra "")
if(DYNVM_HAVE_TORCH)
  target_link_libraries(dynvm INTERFACE $<INSTALL_INTERFACE:torch>
                                         $<INSTALL_INTERFACE:${DYNVM_TORCH_PYTHON_LIBRARY}>)
endif()
if(DYNVM_HAVE_LLVM)
  target_link_libraries(dynvm INTERFACE
    $<INSTALL_INTERFACE:${LLVM_LIBRARY_DIR}/libLLVM-${LLVM_VERSION_MAJOR}.so>)
endif()
if(DYNVM_HAVE_CUDA)
  # NVRTC and the driver are loaded at run time (dlopen).
  target_link_libraries(dynvm INTERFACE $<INSTALL_INTERFACE:${CMAKE_DL_LIBS}>)
endif()

install(TARGETS dynvm EXPORT dynvmTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
set(DYNVM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dynvm)
install(EXPORT dynvmTargets NAMESPACE dynvm:: DESTINATION ${DYNVM_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dynvmConfig.cmake.in
  ${CMAKE_BINARY_DIR}/dynvmConfig.cmake INSTALL_DESTINATION ${DYNVM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/dynvmConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/dynvmConfig.cmake ${CMAKE_BINARY_DIR}/dynvmConfigVersion.cmake
        DESTINATION ${DYNVM_CMAKE_DIR} COMPONENT dev)
