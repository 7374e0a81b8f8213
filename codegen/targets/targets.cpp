// Reports the targets compiled into this build and whether each can run here; the LLVM
// version is the one the build was configured with, NVRTC's the one loaded at run time.
#include "dynvm/codegen/targets.h"

#include "dynvm/codegen/cuda_libraries.h"

namespace dynvm::codegen {

std::vector<TargetInfo> targets() {
  std::vector<TargetInfo> out;
  TargetInfo cpu{"cpu", false, "", "", false, ""};
#ifdef DYNVM_HAVE_LLVM
  cpu.built = true;
  cpu.usable = true;  // the JIT runs in-process on the host
  cpu.toolchain = std::string("LLVM ") + DYNVM_LLVM_VERSION + " ORC JIT";
#else
  cpu.why_not = "LLVM 16 development files were not found when dynvm was configured";
#endif
  out.push_back(cpu);

  TargetInfo cuda{"cuda", false, "", "", false, ""};
#ifdef DYNVM_HAVE_CUDA
  const CudaLibraries& libraries = cuda_libraries();
  cuda.built = true;
  cuda.toolchain = libraries.nvrtc ? "NVRTC " + std::to_string(libraries.nvrtc_major) + "." +
                                         std::to_string(libraries.nvrtc_minor)
                                   : "NVRTC";
  if (!libraries.nvrtc) {
    cuda.why_unusable = libraries.why_not_nvrtc;
  } else if (!libraries.driver || libraries.device_count == 0) {
    cuda.why_unusable = libraries.why_not_driver;
  } else {
    cuda.usable = true;
  }
#else
  cuda.why_not =
      "the headers of NVRTC and the CUDA driver API were not found when dynvm was "
      "configured";
#endif
  out.push_back(cuda);
  return out;
}

std::string describe(const TargetInfo& target) {
  if (!target.built) return target.name + ": not built (" + target.why_not + ")";
  std::string line = target.name + ": built (" + target.toolchain + ")";
  return line + (target.usable ? ", usable" : ", not usable here: " + target.why_unusable);
}

}  // namespace dynvm::codegen
