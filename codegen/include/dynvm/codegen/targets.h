// Which code-generation targets this build of dynvm has, whether each can run on this
// machine, and why not where it cannot.
#pragma once

#include <string>
#include <vector>

namespace dynvm::codegen {

struct TargetInfo {
  std::string name;          // "cpu" or "cuda"
  bool built = false;        // compiled into this build
  std::string toolchain;     // e.g. "LLVM 16.0.6 ORC JIT", "NVRTC 13.0"
  std::string why_not;       // when !built: what was missing at configure time
  bool usable = false;       // built, and what it needs at run time is on this machine
  std::string why_unusable;  // when built && !usable: what is missing here
};

// Every target dynvm knows, in a fixed order (cpu, cuda). Looking at the CUDA target
// loads NVRTC and the driver (once per process).
std::vector<TargetInfo> targets();

// One line for `dynvm --version` and logs: "cuda: built (NVRTC 13.0), not usable here: no
// CUDA driver (...)".
std::string describe(const TargetInfo& target);

}  // namespace dynvm::codegen
