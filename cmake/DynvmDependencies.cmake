# Finds every third-party dependency and wraps each in one dynvm::<name> target, so a
# layer says what it may know by what it links. scripts/install-deps.sh installs them.
include(GNUInstallDirs)

# --- CPython: the interpreter that has torch. Debian's /usr/bin/python3 here; pass
# -DPython3_EXECUTABLE=... elsewhere (the GPU machine's venv python).
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python with torch")
endif()
find_package(Python3 3.11 REQUIRED COMPONENTS Interpreter Development.Module Development.Embed)
if(Python3_VERSION VERSION_GREATER_EQUAL 3.13)
  message(FATAL_ERROR "dynvm supports CPython 3.11 and 3.12, found ${Python3_VERSION}")
endif()
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_path('platlib'))"
  OUTPUT_VARIABLE DYNVM_PYTHON_SITE OUTPUT_STRIP_TRAILING_WHITESPACE)
# Private CPython headers (pycore_frame.h) for the frame hook and the live-code adapter.
add_library(dynvm_python_internal INTERFACE)
target_link_libraries(dynvm_python_internal INTERFACE Python3::Module)
target_include_directories(dynvm_python_internal SYSTEM INTERFACE
  ${Python3_INCLUDE_DIRS} ${Python3_INCLUDE_DIRS}/internal)
target_compile_definitions(dynvm_python_internal INTERFACE Py_BUILD_CORE)
add_library(dynvm::python_internal ALIAS dynvm_python_internal)

# --- libtorch: Debian's libtorch-dev here; the CMake package inside the Python's torch
# on the GPU machine. Found through the Python when not found directly.
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch, os; print(os.path.dirname(torch.__file__))"
  OUTPUT_VARIABLE DYNVM_TORCH_PYDIR OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
find_package(Torch QUIET HINTS ${DYNVM_TORCH_PYDIR}/share/cmake/Torch)
# (Torch's CMake package warns about optional pieces it does not find; QUIET hides it.)
set(DYNVM_HAVE_TORCH ${Torch_FOUND})
if(Torch_FOUND)
  find_library(DYNVM_TORCH_PYTHON_LIBRARY torch_python
    HINTS ${DYNVM_TORCH_PYDIR}/lib /usr/lib/x86_64-linux-gnu)
  add_library(dynvm_torch INTERFACE)
  target_link_libraries(dynvm_torch INTERFACE torch)
  separate_arguments(_dynvm_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(dynvm_torch INTERFACE ${_dynvm_torch_flags})
  add_library(dynvm::torch ALIAS dynvm_torch)
  # THPVariable_Wrap/Unpack: converting torch.Tensor objects to at::Tensor and back.
  add_library(dynvm_torch_python INTERFACE)
  target_link_libraries(dynvm_torch_python INTERFACE dynvm_torch ${DYNVM_TORCH_PYTHON_LIBRARY}
                                                     Python3::Module)
  add_library(dynvm::torch_python ALIAS dynvm_torch_python)
else()
  message(FATAL_ERROR "libtorch was not found: run scripts/install-deps.sh (Debian's "
                      "libtorch-dev), or pass -DPython3_EXECUTABLE= a Python whose torch "
                      "ships its CMake package")
endif()

# --- LLVM for the CPU backend (ORC JIT). LLVM 16: the newest Debian 12 packages, and
# the version whose shared library the GPU machine carries (docs/dependencies.md).
find_package(LLVM 16 CONFIG QUIET HINTS /usr/lib/llvm-16/lib/cmake/llvm)
set(DYNVM_HAVE_LLVM ${LLVM_FOUND})
if(LLVM_FOUND)
  add_library(dynvm_llvm INTERFACE)
  target_include_directories(dynvm_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
  target_compile_definitions(dynvm_llvm INTERFACE ${LLVM_DEFINITIONS})
  if(EXISTS "${LLVM_LIBRARY_DIR}/libLLVM-${LLVM_VERSION_MAJOR}.so")
    target_link_libraries(dynvm_llvm INTERFACE "${LLVM_LIBRARY_DIR}/libLLVM-${LLVM_VERSION_MAJOR}.so")
  else()
    target_link_libraries(dynvm_llvm INTERFACE LLVM)
  endif()
  add_library(dynvm::llvm ALIAS dynvm_llvm)
endif()

# --- CUDA toolkit for the GPU backend: NVRTC and the driver API, no nvcc needed.
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
set(DYNVM_HAVE_CUDA OFF)
if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc AND TARGET CUDA::cuda_driver)
  set(DYNVM_HAVE_CUDA ON)
endif()

# --- Boost.Graph (header-only part) for graph analyses.
find_package(Boost 1.74 REQUIRED)
add_library(dynvm_boost_graph INTERFACE)
target_link_libraries(dynvm_boost_graph INTERFACE Boost::boost)
add_library(dynvm::boost_graph ALIAS dynvm_boost_graph)

function(dynvm_print_configuration)
  message(STATUS "dynvm ${PROJECT_VERSION}: Python ${Python3_VERSION} (${Python3_EXECUTABLE})")
  message(STATUS "  libtorch:    ${DYNVM_HAVE_TORCH} ${Torch_VERSION}")
  message(STATUS "  LLVM:        ${DYNVM_HAVE_LLVM} ${LLVM_PACKAGE_VERSION} (CPU backend)")
  message(STATUS "  CUDA:        ${DYNVM_HAVE_CUDA} ${CUDAToolkit_VERSION} (GPU backend)")
  message(STATUS "  Boost:       ${Boost_VERSION}")
  message(STATUS "  tests:       ${DYNVM_BUILD_TESTS}, sanitizers: ${DYNVM_SANITIZE}")
endfunction()
