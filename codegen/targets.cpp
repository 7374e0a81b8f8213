// Reports the targets compiled into this build; the toolchain versions come from the
// headers the build saw, so this file is the one place that includes them so far.
#include "dynvm/codegen/targets.h"

#ifdef DYNVM_HAVE_LLVM
#include <llvm/Config/llvm-config.h>
#endif
#ifdef DYNVM_HAVE_CUDA
#include <cuda.h>
#include <nvrtc.h>
#endif

namespace dynvm::codegen {

std::vector<TargetInfo> compiled_targets() {
  std::vector<TargetInfo> out;
  TargetInfo cpu{"cpu", false, "", ""};
#ifdef DYNVM_HAVE_LLVM
  cpu.built = true;
  cpu.toolchain = std::string("LLVM ") + LLVM_VERSION_STRING + " ORC JIT";
#else
  cpu.why_not = "LLVM 16 development files were not found when dynvm was configured";
#endif
  out.push_back(cpu);

  TargetInfo cuda{"cuda", false, "", ""};
#ifdef DYNVM_HAVE_CUDA
  cuda.built = true;
  cuda.toolchain = "CUDA " + std::to_string(CUDA_VERSION / 1000) + "." +
                   std::to_string((CUDA_VERSION % 1000) / 10) + " NVRTC";
#else
  cuda.why_not = "the CUDA toolkit (NVRTC, driver API) was not found when dynvm was configured";
#endif
  out.push_back(cuda);
  return out;
}

}  // namespace dynvm::codegen
