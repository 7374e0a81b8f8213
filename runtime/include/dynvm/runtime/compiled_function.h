// CompiledFunction: what dynvm.compile makes of a Python function — a cache of guarded
// variants, traced on a miss, run on a hit, with eager execution where the VM broke.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dynvm/support/py_ref.h"
#include "dynvm/vm/trace.h"

namespace dynvm::runtime {

class Variant;

struct CompileOptions {
  std::string backend = "eager";
  bool fullgraph = false;
  int cache_size_limit = 8;  // variants per function before it runs eagerly for good
};

// Process-wide counters (dynvm.counters); reset() zeroes them and drops every variant.
struct Counters {
  int64_t frames_traced = 0;  // traces that produced a graph variant
  int64_t cache_hits = 0;     // calls served by an existing variant
  int64_t graph_breaks = 0;   // traces that stopped at something unsupported
  int64_t recompiles = 0;     // traces made because every existing variant's guards failed
  int64_t eager_calls = 0;    // calls run eagerly (breaks, over the cache limit)
};
Counters& counters();
void reset_all();

// What explain() reports of one call.
struct Explanation {
  std::vector<std::string> graphs;  // graph text, one per graph
  std::vector<size_t> ops_per_graph;
  std::vector<vm::GraphBreakInfo> breaks;
  std::vector<std::string> guards;
};

class CompiledFunction {
 public:
  // `function` is a borrowed PyFunctionObject.
  CompiledFunction(PyObject* function, CompileOptions options);
  ~CompiledFunction();

  // Calls the function: a new reference, or nullptr with a Python error set.
  PyObject* call(PyObject* args, PyObject* kwargs);
  // Traces the call (without running or caching it) and describes the result; false
  // with a Python error set when the arguments do not bind.
  bool explain(PyObject* args, PyObject* kwargs, Explanation* out);

 private:
  PyObject* call_eagerly(PyObject* args, PyObject* kwargs);
  PyObject* raise_graph_break(const vm::GraphBreakInfo& info);

  PyRef function_;
  CompileOptions options_;
  std::vector<std::unique_ptr<Variant>> variants_;  // most recently hit first
  uint64_t epoch_ = 0;
  bool gave_up_ = false;  // over the cache limit: runs eagerly from now on
};

// The exception type raised for a graph break under fullgraph=True (set by the module).
void set_graph_break_error_type(PyObject* type);

}  // namespace dynvm::runtime
