// run_loop_passes(): runs loop-IR passes by name over one kernel, verifying the kernel
// before the first pass and after each, timing each, and dumping the kernel around each
// when DYNVM_LOGS names "loops". The loop IR's counterpart of graph/pass_runner.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dynvm/codegen/loop_ir.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

struct LoopPassOptions {
  // Print the kernel before the first pass and after every pass; nullopt: when DYNVM_LOGS
  // names "loops".
  std::optional<bool> dump;
  // Where dumps go; nullptr: stderr.
  std::string* dump_to = nullptr;
};

struct LoopPassTiming {
  std::string pass;
  double milliseconds = 0;
};

// Runs `passes` in order (see known_loop_passes()). Fails before running anything when a
// name is unknown or the kernel does not verify, and stops at the first pass after which
// it does not: the error names the pass and the verifier's first problem, and the caller
// runs the group through ATen.
Expected<std::vector<LoopPassTiming>> run_loop_passes(LoopKernel& kernel,
                                                      const std::vector<std::string>& passes,
                                                      const LoopPassOptions& options = {});

// The pass names run_loop_passes accepts, in the order they are listed, each with what
// it does in a sentence.
struct LoopPassInfo {
  std::string name;
  std::string summary;
};
std::vector<LoopPassInfo> known_loop_passes();

}  // namespace dynvm::codegen
