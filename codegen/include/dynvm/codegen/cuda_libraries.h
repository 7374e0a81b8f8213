// NVRTC and the CUDA driver API, loaded at run time. A build with the CUDA target links
// neither library, so it loads and runs on machines without a driver, a GPU or NVRTC;
// what is missing is said in words (cuda_libraries().why_not), and the CUDA target reports
// it instead of failing. Only this file's implementation includes cuda.h and nvrtc.h.
#pragma once

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

}  // namespace dynvm::codegen
