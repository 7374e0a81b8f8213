# Finds every third-party dependency and wraps each in one dynvm::<name> target, so a
# layer says what it may know by what it links. scripts/install-deps.sh installs them (the
# Python side, torch included, through scripts/setup-venv.sh).
include(GNUInstallDirs)

# --- CPython: the interpreter that has torch. Here, the environment scripts/setup-venv.sh
# makes ($DYNVM_VENV, default /opt/dynvm-venv); pass -DPython3_EXECUTABLE=... elsewhere
# (the GPU machine's venv python). scikit-build-core (`pip install .`) passes its own.
if(NOT DEFINED Python3_EXECUTABLE)
  if(DEFINED ENV{DYNVM_VENV})
    set(_dynvm_venv "$ENV{DYNVM_VENV}")
  else()
    set(_dynvm_venv /opt/dynvm-venv)
  endif()
  if(EXISTS "${_dynvm_venv}/bin/python3")
    set(Python3_EXECUTABLE "${_dynvm_venv}/bin/python3" CACHE FILEPATH "Python with torch")
  endif()
endif()
find_package(Python3 3.11 REQUIRED COMPONENTS Interpreter Development.Module Development.Embed)
if(Python3_VERSION VERSION_GREATER_EQUAL 3.14)
  message(FATAL_ERROR "dynvm supports CPython 3.11 to 3.13, found ${Python3_VERSION}")
elseif(Python3_VERSION VERSION_GREATER_EQUAL 3.13 AND NOT DYNVM_PROBE_ONLY)
  message(FATAL_ERROR "dynvm's VM executes CPython 3.11 and 3.12, found ${Python3_VERSION}: "
                      "for 3.13, configure with -DDYNVM_PROBE_ONLY=ON (its listings and "
                      "frame access, no torch)")
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
if(DYNVM_PROBE_ONLY)
  return()  # nothing else: no torch, CUDA, LLVM or Boost
endif()

# --- CUDA toolkit for the GPU backend: NVRTC and the driver API, no nvcc needed. Found
# before libtorch, whose package (a CUDA build of torch) looks for the toolkit too. Only
# its headers are needed to build (see "CUDA target" below).
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)

# --- libtorch: the CMake package inside that Python's torch (torch/share/cmake/Torch), so
# the C++ and the Python sides are one torch. Found without importing torch (seconds);
# `-E` too, because pip's isolated build environment hides the venv's own packages.
foreach(_dynvm_python_flags "" "-E")
  execute_process(
    COMMAND ${Python3_EXECUTABLE} ${_dynvm_python_flags} -c
            "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])"
    OUTPUT_VARIABLE DYNVM_TORCH_PYDIR OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(DYNVM_TORCH_PYDIR)
    break()
  endif()
endforeach()
if(DYNVM_TORCH_PYDIR AND EXISTS "${DYNVM_TORCH_PYDIR}/share/cmake/Torch")
  # That package and its Caffe2 package, forced: TorchConfig's own search for Caffe2
  # would prefer one installed on the system (Debian's libtorch-dev, an older torch) to
  # the one beside it, and a build folder configured before may remember another torch.
  set(Torch_DIR "${DYNVM_TORCH_PYDIR}/share/cmake/Torch" CACHE PATH "Torch of that Python" FORCE)
  set(Caffe2_DIR "${DYNVM_TORCH_PYDIR}/share/cmake/Caffe2" CACHE PATH "Caffe2 of that torch" FORCE)
  # dynvm uses only the CPU side of libtorch; the CUDA libraries of a CUDA build (the
  # wheels are) come with it and load with it. Such a build's package would also find a
  # CUDA toolkit and enable the CUDA language in this project, or fail: with no toolkit,
  # with CMake 3.25's dialects (CUDA20) and with torch's FindCUDA picking the first nvcc
  # on PATH. An empty torch::cudart, which is the guard that makes torch's cuda.cmake
  # return at once, skips that: the GPU backend finds the toolkit by itself (above).
  if(NOT TARGET torch::cudart)
    add_library(torch::cudart INTERFACE IMPORTED)
  endif()
  # Torch's CMake package warns about optional pieces it does not find; QUIET hides it.
  find_package(Torch QUIET CONFIG PATHS "${DYNVM_TORCH_PYDIR}/share/cmake/Torch" NO_DEFAULT_PATH)
endif()
set(DYNVM_HAVE_TORCH ${Torch_FOUND})
if(Torch_FOUND)
  # The full version ("2.14.1+cu130"), for `dynvm --version` and the configure summary.
  set(DYNVM_TORCH_VERSION ${Torch_VERSION})
  if(EXISTS "${DYNVM_TORCH_PYDIR}/version.py")
    file(STRINGS "${DYNVM_TORCH_PYDIR}/version.py" _dynvm_torch_version_line
         REGEX "^__version__ = ")
    if(_dynvm_torch_version_line MATCHES "__version__ = '([^']+)'")
      set(DYNVM_TORCH_VERSION ${CMAKE_MATCH_1})
    endif()
  endif()
  unset(DYNVM_TORCH_PYTHON_LIBRARY CACHE)  # never one of another torch found before
  find_library(DYNVM_TORCH_PYTHON_LIBRARY torch_python
    PATHS ${DYNVM_TORCH_PYDIR}/lib NO_DEFAULT_PATH)
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
  message(FATAL_ERROR "libtorch was not found in the torch of ${Python3_EXECUTABLE}: run "
                      "scripts/setup-venv.sh, or pass -DPython3_EXECUTABLE= a Python whose "
                      "torch (2.x) ships its CMake package (a build folder configured "
                      "before the move to torch 2 remembers /usr/bin/python3: pass "
                      "-DPython3_EXECUTABLE=/opt/dynvm-venv/bin/python3, or run "
                      "scripts/build.sh)")
endif()

# --- CUDA target: built from the headers of NVRTC and the driver API (cuda.h, nvrtc.h);
# the libraries are loaded at run time (codegen/cuda/cuda_libraries.cpp), so that one build
# runs on machines with no driver or no GPU and reports why the target is not usable
# there. The headers come from the toolkit or from the NVIDIA package that a CUDA build
# of torch installs beside it (site-packages/nvidia/cu13), which also carries NVRTC.
set(DYNVM_HAVE_CUDA OFF)
set(_dynvm_cuda_hints "")
if(CUDAToolkit_FOUND)
  list(APPEND _dynvm_cuda_hints ${CUDAToolkit_INCLUDE_DIRS})
endif()
if(DYNVM_TORCH_PYDIR)
  file(GLOB _dynvm_nvidia_includes "${DYNVM_TORCH_PYDIR}/../nvidia/cu*/include")
  list(APPEND _dynvm_cuda_hints ${_dynvm_nvidia_includes})
endif()
find_path(DYNVM_NVRTC_INCLUDE_DIR nvrtc.h HINTS ${_dynvm_cuda_hints} NO_DEFAULT_PATH)
find_path(DYNVM_CUDA_INCLUDE_DIR cuda.h HINTS ${DYNVM_NVRTC_INCLUDE_DIR} ${_dynvm_cuda_hints}
          NO_DEFAULT_PATH)
if(DYNVM_NVRTC_INCLUDE_DIR AND DYNVM_CUDA_INCLUDE_DIR)
  set(DYNVM_HAVE_CUDA ON)
  get_filename_component(DYNVM_CUDA_ROOT "${DYNVM_NVRTC_INCLUDE_DIR}" DIRECTORY)
  get_filename_component(DYNVM_CUDA_ROOT "${DYNVM_CUDA_ROOT}" REALPATH)
  add_library(dynvm_cuda_headers INTERFACE)
  target_include_directories(dynvm_cuda_headers SYSTEM INTERFACE ${DYNVM_NVRTC_INCLUDE_DIR}
                                                                  ${DYNVM_CUDA_INCLUDE_DIR})
  target_link_libraries(dynvm_cuda_headers INTERFACE ${CMAKE_DL_LIBS})
  add_library(dynvm::cuda_headers ALIAS dynvm_cuda_headers)
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

# --- Boost.Graph (header-only part) for graph analyses.
find_package(Boost 1.74 REQUIRED)
add_library(dynvm_boost_graph INTERFACE)
target_link_libraries(dynvm_boost_graph INTERFACE Boost::boost)
add_library(dynvm::boost_graph ALIAS dynvm_boost_graph)

function(dynvm_print_configuration)
  message(STATUS "dynvm ${PROJECT_VERSION}: Python ${Python3_VERSION} (${Python3_EXECUTABLE})")
  message(STATUS "  libtorch:    ${DYNVM_HAVE_TORCH} ${DYNVM_TORCH_VERSION} (${DYNVM_TORCH_PYDIR})")
  message(STATUS "  LLVM:        ${DYNVM_HAVE_LLVM} ${LLVM_PACKAGE_VERSION} (CPU backend)")
  message(STATUS "  CUDA:        ${DYNVM_HAVE_CUDA} (GPU backend; NVRTC and driver loaded at run time; "
                 "headers ${DYNVM_NVRTC_INCLUDE_DIR})")
  message(STATUS "  Boost:       ${Boost_VERSION}")
  message(STATUS "  tests:       ${DYNVM_BUILD_TESTS}, sanitizers: ${DYNVM_SANITIZE}")
endfunction()
