// run_passes(): runs graph passes by name, timing each, verifying after each, and
// dumping the graph around each when DYNVM_LOGS names "graph".
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

struct PassRunOptions {
  // Run verify() after every pass. Debug builds (without NDEBUG) always do.
  bool verify = false;
  // Print the graph before and after every pass; nullopt: when DYNVM_LOGS names "graph".
  std::optional<bool> dump;
  // Where dumps go; nullptr: std::cerr.
  std::ostream* dump_stream = nullptr;
};

struct PassTiming {
  std::string pass;
  double milliseconds = 0;
  size_t nodes_before = 0;
  size_t nodes_after = 0;
};

// Runs `passes` in order ("dce", "cse"; see known_passes()). Fails before running
// anything when a name is unknown, and stops at the first pass that breaks the graph
// (a verifier problem or an internal error): the graph is then unusable and the caller
// falls back to eager execution.
Expected<std::vector<PassTiming>> run_passes(Graph& graph, const std::vector<std::string>& passes,
                                             const PassRunOptions& options = {});

// The pass names run_passes accepts, in the order they are listed.
std::vector<std::string> known_passes();

// "dce, cse" → {"dce", "cse"}; empty entries are dropped.
std::vector<std::string> split_pass_list(std::string_view list);

// True when the DYNVM_LOGS environment variable (comma-separated) contains "graph".
bool graph_logging_enabled();

}  // namespace dynvm::graph
