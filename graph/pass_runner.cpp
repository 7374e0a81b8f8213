// The pass registry and the runner that times, verifies and logs every pass.
#include "dynvm/graph/pass_runner.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "dynvm/graph/attention_rewrite.h"
#include "dynvm/graph/channels_last.h"
#include "dynvm/graph/check.h"
#include "dynvm/graph/common_subexpression_elimination.h"
#include "dynvm/graph/dead_code_elimination.h"
#include "dynvm/graph/decompose.h"
#include "dynvm/graph/functionalize.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/verify.h"

namespace dynvm::graph {

namespace {

// X(name used in pass lists and test files, function). The one list of passes.
#define DYNVM_GRAPH_PASSES(X)                \
  X("dce", dead_code_elimination)            \
  X("cse", common_subexpression_elimination) \
  X("functionalize", functionalize)          \
  X("attention", rewrite_attention)          \
  X("decompose", decompose)                  \
  X("channels_last", use_channels_last)

using PassFunction = void (*)(Graph&);

PassFunction find_pass(std::string_view name) {
#define DYNVM_GRAPH_PASS_FIND(n, function) \
  if (name == n) return &function;
  DYNVM_GRAPH_PASSES(DYNVM_GRAPH_PASS_FIND)
#undef DYNVM_GRAPH_PASS_FIND
  return nullptr;
}

#ifdef NDEBUG
constexpr bool kDebugBuild = false;
#else
constexpr bool kDebugBuild = true;
#endif

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One indented line per problem, each after a newline; empty when there are none.
std::string describe_problems(const std::vector<Error>& problems) {
  std::string text;
  for (const Error& problem : problems) text += "\n  " + problem.message;
  return text;
}

}  // namespace

std::vector<std::string> known_passes() {
  return {
#define DYNVM_GRAPH_PASS_NAME(n, function) n,
      DYNVM_GRAPH_PASSES(DYNVM_GRAPH_PASS_NAME)
#undef DYNVM_GRAPH_PASS_NAME
  };
}

std::vector<std::string> split_pass_list(std::string_view list) {
  std::vector<std::string> names;
  while (true) {
    size_t comma = list.find(',');
    std::string_view name = trim(list.substr(0, comma));
    if (!name.empty()) names.emplace_back(name);
    if (comma == std::string_view::npos) return names;
    list.remove_prefix(comma + 1);
  }
}

bool graph_logging_enabled() {
  const char* logs = std::getenv("DYNVM_LOGS");
  if (logs == nullptr) return false;
  for (const std::string& topic : split_pass_list(logs)) {
    if (topic == "graph") return true;
  }
  return false;
}

Expected<std::vector<PassTiming>> run_passes(Graph& graph, const std::vector<std::string>& passes,
                                             const PassRunOptions& options) {
  std::vector<PassFunction> functions;
  for (const std::string& name : passes) {
    PassFunction function = find_pass(name);
    if (function == nullptr) {
      std::string known;
      for (const std::string& k : known_passes()) known += (known.empty() ? "" : ", ") + k;
      return make_error("unknown graph pass '" + name + "' (known: " + known + ")");
    }
    functions.push_back(function);
  }
  bool verify_each = options.verify || kDebugBuild;
  bool dump = options.dump.value_or(graph_logging_enabled());
  std::ostream& log = options.dump_stream != nullptr ? *options.dump_stream : std::cerr;

  // Checked first so a broken input is not blamed on the first pass.
  if (verify_each) {
    std::string problems = describe_problems(verify(graph));
    if (!problems.empty())
      return make_error("the graph given to the passes is malformed:" + problems);
  }
  std::vector<PassTiming> timings;
  for (size_t i = 0; i < passes.size(); ++i) {
    PassTiming timing;
    timing.pass = passes[i];
    timing.nodes_before = graph.num_nodes();
    if (dump) log << "[dynvm graph] before " << passes[i] << ":\n" << to_text(graph);
    auto start = std::chrono::steady_clock::now();
    try {
      functions[i](graph);
    } catch (const InternalError& bug) {
      return make_error("graph pass '" + passes[i] + "' failed: " + bug.what());
    }
    auto stop = std::chrono::steady_clock::now();
    timing.milliseconds = std::chrono::duration<double, std::milli>(stop - start).count();
    timing.nodes_after = graph.num_nodes();
    if (dump) {
      log << "[dynvm graph] after " << passes[i] << " (" << timing.milliseconds << " ms, "
          << timing.nodes_before << " -> " << timing.nodes_after << " nodes):\n"
          << to_text(graph);
    }
    if (verify_each) {
      std::string problems = describe_problems(verify(graph));
      if (!problems.empty()) {
        return make_error("graph pass '" + passes[i] + "' left a malformed graph:" + problems);
      }
    }
    timings.push_back(std::move(timing));
  }
  return timings;
}

}  // namespace dynvm::graph
