// Opcode coverage: what the VM did with each kind of instruction it met in this process.
// Every instruction the VM executes while tracing is counted under its base opcode; a trace
// that stops counts a break at the innermost instruction it stopped on, under its reason,
// and a refusal where the VM has no rule for that opcode at all. scripts/coverage.py turns
// these counts, gathered over test suites and fuzzing runs, into the per-opcode report.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dynvm/frontend/opcode.h"

namespace dynvm::vm {

struct OpcodeCoverage {
  frontend::Opcode opcode{};
  uint64_t executed = 0;  // instructions executed while tracing (every attempt of a trace)
  uint64_t breaks = 0;    // traces that stopped on it
  uint64_t refused = 0;   // of those, stops because the VM has no rule for the opcode
  // Break reasons with quoted names collapsed ('x' -> '…'), so that one rule is one line.
  std::map<std::string, uint64_t> reasons;
};

// Counts one executed instruction. Called for every step of the VM: one increment.
void count_executed(frontend::Opcode opcode);

// Counts a trace that stopped on `opcode` with `reason`.
void count_break(frontend::Opcode opcode, const std::string& reason, bool refused);

// Every opcode met so far (executed or broken on), in opcode order.
std::vector<OpcodeCoverage> opcode_coverage();

void reset_opcode_coverage();

// `reason` with every quoted part ('...' or "...") replaced by '…'.
std::string reason_category(const std::string& reason);

}  // namespace dynvm::vm
