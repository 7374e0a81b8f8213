// run_report: what the runtime compiled and where it broke, for `dynvm run`'s report at
// exit, DYNVM_LOGS and dynvm.counters. Process-wide; dynvm.reset() clears it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dynvm::runtime {

struct RunReport {
  struct Graph {
    std::string function;  // qualified name
    std::string location;  // file:line where the traced part starts
    size_t ops = 0;
    // Dynamic shapes: "s0 = L['x'].size()[0]" per size symbol, and the relations assumed.
    std::vector<std::string> symbols;
    std::vector<std::string> relations;
  };
  struct Break {
    std::string reason;
    std::string filename;
    int lineno = 0;
    int64_t count = 0;  // traces that stopped there
  };
  struct Recompile {
    std::string function;
    std::string guard;  // the guard that failed
  };
  struct CudaGraph {
    std::string graph;  // "function (file:line)" of the graph
    std::string note;   // what became of it under mode="reduce-overhead" (CudaGraphReplay)
  };
  std::set<std::string> frames_compiled;  // "qualname (file:line)" of code with a graph
  std::vector<Graph> graphs;
  std::map<std::string, Break> breaks;  // by "file:line: reason"
  std::vector<Recompile> recompiles;
  std::vector<CudaGraph> cuda_graphs;  // recordings made, and graphs that are not recorded
  int64_t cache_hits = 0;
  int64_t trace_ns = 0;  // time spent tracing
  int64_t run_ns = 0;    // time spent running compiled variants (graphs and rebuilds)

  void add_break(const std::string& reason, const std::string& filename, int lineno) {
    Break& b = breaks[filename + ":" + std::to_string(lineno) + ": " + reason];
    b.reason = reason;
    b.filename = filename;
    b.lineno = lineno;
    ++b.count;
  }
};

RunReport& run_report();

}  // namespace dynvm::runtime
