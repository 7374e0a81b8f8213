// NVRTC and the CUDA driver API, loaded at run time. A build with the CUDA target links
// neither library, so it loads and runs on machines without a driver, a GPU or NVRTC;
// what is missing is said in words (cuda_libraries().why_not), and the CUDA target reports
// it instead of failing. Only this file's implementation includes cuda.h and nvrtc.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dynvm/support/expected.h"

namespace dynvm::codegen {

struct CudaLibraries {
  bool nvrtc = false;   // NVRTC loaded, with every entry point dynvm uses
  int nvrtc_major = 0;  // its version, from nvrtcVersion
  int nvrtc_minor = 0;
  std::string nvrtc_path;      // what was loaded, as dlopen was given it
  bool driver = false;         // libcuda loaded and cuInit succeeded
  int driver_version = 0;      // cuDriverGetVersion (13000 for 13.0), when loaded
  int device_count = 0;        // devices the driver sees
  std::string why_not_nvrtc;   // when !nvrtc
  std::string why_not_driver;  // when !driver or device_count == 0
};

// Loads both libraries once per process (thread-safe) and reports what it found. Never
// throws and never crashes on a machine without them.
const CudaLibraries& cuda_libraries();

// Compiles CUDA C++ source with NVRTC for a virtual or real architecture ("compute_90",
// "sm_90") and returns the PTX. The error carries NVRTC's log.
Expected<std::string> nvrtc_compile_to_ptx(const std::string& source, const std::string& name,
                                           const std::string& architecture);
// The same for a real architecture ("sm_90"), giving the CUBIN the driver loads as is.
Expected<std::string> nvrtc_compile_to_cubin(const std::string& source, const std::string& name,
                                             const std::string& architecture);

// What the driver says of device `device` (an ordinal, as torch numbers CUDA devices).
struct CudaDeviceInfo {
  int major = 0;  // compute capability
  int minor = 0;
  int multiprocessors = 0;
  std::string architecture() const { return "sm_" + std::to_string(major * 10 + minor); }
};
Expected<CudaDeviceInfo> cuda_device_info(int device);

// Loads `image` (a CUBIN or PTX) into the primary context of `device` and returns the
// function `name` of it (a CUfunction). Modules stay loaded for the process's life.
Expected<void*> cuda_load_function(int device, const std::string& image, const std::string& name);

// Launches `function` on `stream` (a CUstream; nullptr: the legacy default stream) with
// the primary context of `device` current. `args` points at each kernel parameter.
// Returns "" or what the driver said.
std::string cuda_launch(int device, void* function, int64_t grid, int block, void* stream,
                        void** args);

// Queues a copy of `bytes` bytes between two addresses of device `device`'s memory on
// `stream` (cuMemcpyDtoDAsync). Returns "" or what the driver said.
std::string cuda_copy_async(int device, void* destination, const void* source, size_t bytes,
                            void* stream);

// Launches an instantiated CUDA graph (a CUgraphExec) on `stream`. Returns "" or what the
// driver said.
std::string cuda_graph_launch(int device, void* graph_exec, void* stream);

}  // namespace dynvm::codegen
