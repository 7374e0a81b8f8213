// frame_driver: runs one live frame with dynvm. From the frame's start, and again after
// every graph break, it looks up the variants cached for (code object, instruction),
// checks their guards, traces on a miss, runs the graph, rebuilds the frame's locals and
// value stack, executes the breaking instruction itself where it can and continues
// tracing after it, or hands the frame to CPython's evaluator at that instruction.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>

#include "dynvm/runtime/compiled_function.h"
#include "dynvm/runtime/frame_access.h"

namespace dynvm::runtime {

// Evaluates `frame` (fresh: no instruction executed yet) as the frame evaluator must:
// returns what the frame returns (a new reference) or nullptr with an exception set; the
// frame is finished either way.
PyObject* drive_frame(PyThreadState* ts, frame::Frame* f, const CompileOptions& options);

// While alive, every trace made on this thread is described in `out` (graphs and their
// op counts, breaks, guards), variants cached before it are not used (those it traces are,
// as a compiled call would reuse them), and code dynvm had left to CPython is traced
// again: dynvm.explain.
class ExplainRecorder {
 public:
  explicit ExplainRecorder(Explanation* out);
  ~ExplainRecorder();
  ExplainRecorder(const ExplainRecorder&) = delete;
  ExplainRecorder& operator=(const ExplainRecorder&) = delete;

 private:
  Explanation* saved_;
  uint64_t saved_call_;
};

// Whether dynvm has decided to leave this code object to CPython (nothing to compile).
bool code_is_skipped(PyObject* code);

// For benchmarks: the cost of the pieces of a cache hit of `function` called with the
// positional `args` (a tuple), whose variant for `backend` (CompileOptions::variant_key:
// "dynvm reduce-overhead" for that mode) must already be cached and
// return without a break. Nanoseconds per iteration, averaged over `iterations` for the
// guards and `run_iterations` for the graph (0: not timed); false
// with a Python error set when there is no such variant.
struct VariantTiming {
  double guards_ns = 0;              // checking the variant's guards as a cache hit does
  double interpreted_guards_ns = 0;  // the same guards through the interpreter
  double run_ns = 0;                 // running its graph and rebuilding the result
  size_t guard_count = 0;
  bool guards_compiled = false;  // guards_ns is the compiled guards' time
  double guards_compile_ms = 0;  // what compiling them took
};
bool time_cached_variant(PyObject* function, PyObject* args, const std::string& backend,
                         int iterations, int run_iterations, VariantTiming* out);

}  // namespace dynvm::runtime
