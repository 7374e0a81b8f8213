// CompiledFunction: what dynvm.compile makes of a Python function — calls it with the
// frame hook on for its frames and the user code it calls (frame_hook.h), where cached
// guarded variants run and graph breaks resume eagerly (frame_driver.h).
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
  std::string mode = "default";  // "default" or "reduce-overhead" (CUDA graphs)
  bool fullgraph = false;
  int cache_size_limit = 8;  // variants per function before it runs eagerly for good
  // Dynamic shapes, as torch.compile's `dynamic`: -1 (None) a dimension whose size changed
  // between calls is traced symbolically from the next trace on; 1 (True) every dimension
  // is symbolic from the first trace; 0 (False) sizes are always fixed.
  int dynamic = -1;

  // What variants are cached under: the backend, and the mode when it is not the default.
  std::string variant_key() const {
    std::string key = mode == "default" ? backend : backend + " " + mode;
    return dynamic == 1 ? key + " dynamic" : key;
  }
};

// Whether the native runtime implements `mode` ("default", "reduce-overhead"); false with a
// ValueError set otherwise.
bool valid_mode(const char* mode);

// Process-wide counters (dynvm.counters); reset() zeroes them and drops every variant.
struct Counters {
  int64_t frames_traced = 0;   // traces that produced a graph variant
  int64_t cache_hits = 0;      // calls served by an existing variant
  int64_t graph_breaks = 0;    // traces that stopped at something unsupported
  int64_t recompiles = 0;      // traces made because every existing variant's guards failed
  int64_t eager_calls = 0;     // calls run eagerly (breaks, over the cache limit)
  int64_t kernels = 0;         // fused groups compiled to kernels (backend "dynvm")
  int64_t graph_failures = 0;  // graphs that raised at run time (the part then ran eagerly)
  int64_t guard_glues = 0;     // variants whose guards were compiled (guard_glue.h)
  int64_t glue_runs = 0;       // calls whose graph ran inside a native function (variant_glue.h)
  // Graphs autograd records that got a compiled backward (graph_autograd_node.h), with the
  // bytes their forwards keep for the backward, and what those would be without
  // recomputation, and the time spent compiling each half (microseconds).
  int64_t compiled_backwards = 0;
  int64_t saved_bytes = 0;
  int64_t saved_bytes_without_recompute = 0;
  int64_t forward_compile_us = 0;
  int64_t backward_compile_us = 0;
};
Counters& counters();
void reset_all();
// Bumped by reset_all(): caches made under an older epoch are dropped when next used.
uint64_t current_epoch();
// DYNVM_LOGS contains `what` (or "all").
bool log_enabled(const char* what);
// Sets dynvm.GraphBreakError for a break under fullgraph=True in `where`.
void set_graph_break_error(const std::string& where, const vm::GraphBreakInfo& info);

// What explain() reports of one call.
struct Explanation {
  std::vector<std::string> graphs;  // graph text, one per graph
  std::vector<size_t> ops_per_graph;
  std::vector<vm::GraphBreakInfo> breaks;
  std::vector<std::string> guards;
  std::vector<std::string> cuda_graphs;  // mode="reduce-overhead": per graph, its note
};

class CompiledFunction {
 public:
  // `function` is a borrowed PyFunctionObject.
  CompiledFunction(PyObject* function, CompileOptions options);
  ~CompiledFunction();

  // Calls the function: a new reference, or nullptr with a Python error set.
  PyObject* call(PyObject* args, PyObject* kwargs);
  // The same through the vectorcall protocol (no argument tuple is built).
  PyObject* call_vector(PyObject* const* args, size_t nargsf, PyObject* kwnames);
  // Traces the call (without running or caching it) and describes the result; false
  // with a Python error set when the arguments do not bind.
  bool explain(PyObject* args, PyObject* kwargs, Explanation* out);

 private:
  PyRef function_;
  CompileOptions options_;
};

// The exception type raised for a graph break under fullgraph=True (set by the module).
void set_graph_break_error_type(PyObject* type);

}  // namespace dynvm::runtime
