// Which code-generation targets this build of dynvm has, and why a missing one is off.
#pragma once

#include <string>
#include <vector>

namespace dynvm::codegen {

struct TargetInfo {
  std::string name;       // "cpu" or "cuda"
  bool built = false;     // compiled into this build
  std::string toolchain;  // e.g. "LLVM 16.0.6 ORC JIT", "NVRTC 13.0"
  std::string why_not;    // when !built: what was missing at configure time
};

// Every target dynvm knows, in a fixed order (cpu, cuda).
std::vector<TargetInfo> compiled_targets();

}  // namespace dynvm::codegen
