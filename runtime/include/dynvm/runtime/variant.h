// Variant: one compiled version of a function — its guards, and either the executor
// that replays its graph or the note that this path breaks and runs eagerly.
#pragma once

#include <Python.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/runtime/guard_glue.h"
#include "dynvm/support/expected.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/guard_eval.h"
#include "dynvm/vm/trace.h"

namespace at {
class Tensor;
}
namespace dynvm::codegen {
class CompiledGraph;
struct CompiledBackward;
}  // namespace dynvm::codegen

namespace dynvm::runtime {

class CudaGraphReplay;

// The calling thread's autograd grad mode (ATen's, without going through Python).
bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);

class Variant {
 public:
  // Prepares the trace for execution (an Error when the backend cannot run its graph).
  // `backend`: "eager" or "dynvm" (codegen::CompiledGraph). `mode` "reduce-overhead"
  // replays the graph as a CUDA graph where it can (cuda_graph_replay.h); `where` names
  // the graph in what that reports.
  static Expected<std::unique_ptr<Variant>> build(vm::Trace trace,
                                                  const std::string& backend = "eager",
                                                  const std::string& mode = "default",
                                                  const std::string& where = "");
  ~Variant();

  // GIL held. Whether the variant's guards hold for this call: through its compiled guards
  // (guard_glue.h) once the variant has been checked often enough (guard_glue_policy), else,
  // and whenever `why` asks for an explanation, through the interpreter (vm::guards_hold).
  // With `keep` (and compiled guards that hold), the values the check read are kept there
  // for run(), which then does not read the graph's inputs again; when the variant's native
  // function includes the run (variant_glue.h), it runs the graph too and `keep` holds the
  // finished run, which run() only packs.
  bool guards_hold(const vm::FrameInputs& inputs, vm::GuardFailure* why = nullptr,
                   GlueValues* keep = nullptr) const;
  // Whether this variant's guards run compiled now, and whether that function runs the graph.
  bool guards_compiled() const { return glue_ != nullptr; }
  bool run_compiled() const { return glue_ != nullptr && glue_->runs(); }
  // How long compiling them took (0 while they are not compiled).
  double guards_compile_milliseconds() const { return glue_ ? glue_->compile_milliseconds() : 0; }
  // Runs the graph on this call's inputs and rebuilds the return value: a new
  // reference, or nullptr with a Python error set.
  PyObject* run(const vm::FrameInputs& inputs) const;

  // What running a variant gives: the return value, or at a graph break the frame's
  // locals (keep_local: leave the slot as it is) and value stack (a null PyRef is
  // CPython's NULL).
  struct Outcome {
    PyRef value;
    std::vector<PyRef> locals;
    std::vector<bool> keep_local;
    std::vector<PyRef> stack;
  };
  // Runs the graph, replays the side effects and rebuilds the outcome; false with a
  // Python error set when something failed. `checked`: what guards_hold kept for this call.
  bool run(const vm::FrameInputs& inputs, Outcome* out, GlueValues* checked = nullptr) const;

  // The trace stopped at a graph break (with or without a graph before it).
  bool breaks() const { return trace_.graph_break.has_value(); }
  // Nothing was traced: the frame continues eagerly from where the trace started.
  bool eager() const { return trace_.graph_break.has_value() && !trace_.resume.has_value(); }
  size_t op_count() const { return trace_.graph.num_nodes(); }
  // Under backend "dynvm": fused groups compiled to kernels, and why none were (or "").
  size_t kernel_count() const;
  // Graphviz of the variant's graph as it runs (fused groups as clusters); "" when none.
  std::string to_dot(const std::string& name) const;
  std::string why_not_fused() const;
  // The compiled backward of a graph autograd records (nullptr when it has none), and why
  // such a graph has none ("" otherwise).
  const codegen::CompiledBackward* compiled_backward() const;
  std::string why_no_compiled_backward() const;
  // Under mode="reduce-overhead": whether the graph replays as a CUDA graph, or why not
  // (CudaGraphReplay::note); "" in other modes.
  std::string cuda_graph_note() const;
  const vm::Trace& trace() const { return trace_; }
  // Dynamic shapes: how many sets of symbol values the graph has been compiled for (0 for a
  // graph of fixed sizes).
  size_t specialization_count() const { return specializations_.size(); }

 private:
  explicit Variant(vm::Trace trace);
  bool run_graph(const vm::FrameInputs& inputs, const GlueValues* checked,
                 std::vector<at::Tensor>* outputs) const;
  bool finish(const vm::FrameInputs& inputs, const std::vector<at::Tensor>& outputs,
              Outcome* out) const;
  void compile_guards() const;
  struct Specialization;
  // Dynamic shapes: the specialization for this call's symbol values (read from the graph's
  // input tensors), built on the first call with them; null with a Python error set on
  // failure.
  Specialization* specialization_for(const std::vector<at::Tensor>& tensors) const;
  // mode="reduce-overhead" on a graph with symbols: gives `s` its own CUDA graph, unless its
  // executor cannot be one; past kMaxCudaGraphs, the least recently used one's goes.
  void give_cuda_graph(Specialization& s, const std::vector<int64_t>& values) const;
  vm::Trace trace_;
  std::string backend_;
  std::string mode_;
  // Dynamic shapes: per symbol, the graph input and dimension it is read from; and the
  // graph specialized to each set of symbol values met so far, with its executor.
  std::vector<std::pair<int, int>> symbol_inputs_;
  struct Specialization {
    std::shared_ptr<codegen::CompiledGraph> executor;
    uint64_t last_used = 0;
    // mode="reduce-overhead": this size's CUDA graph, recorded after its own warm-up call
    // (each has its private memory pool); null when it has none (yet), and why_not says
    // why where it never can.
    std::shared_ptr<CudaGraphReplay> cuda_graph;
    std::string cuda_graph_why_not;
  };
  // CUDA graphs kept for the sizes of one graph with symbols: each holds a memory pool as
  // large as its run's temporaries.
  static constexpr size_t kMaxCudaGraphs = 16;
  mutable std::map<std::vector<int64_t>, Specialization> specializations_;
  mutable uint64_t specialization_clock_ = 0;
  // Shared: the autograd node of a call that records autograd keeps it for its backward.
  std::shared_ptr<codegen::CompiledGraph> executor_;
  // mode="reduce-overhead": runs executor_ (mutable: it records on a later call).
  mutable std::unique_ptr<CudaGraphReplay> cuda_graph_;
  std::string cuda_graph_why_not_;  // why the graph is not a candidate at all
  // A graph with symbols under mode="reduce-overhead": each specialization gets its own
  // CUDA graph (give_cuda_graph), made with these.
  bool cuda_graph_per_size_ = false;
  std::vector<bool> cuda_graph_in_place_;
  std::string where_;
  // Compiled guards, made on the policy's check (a cache: set from const methods, GIL held).
  mutable std::unique_ptr<GuardGlue> glue_;
  mutable int checks_before_glue_ = 0;  // interpreter checks left before compiling; -1: never
  GlueRun glue_run_;  // what the native function runs after the guards (when it can)
  vm::SourceTable input_sources_;
  std::vector<int> input_slots_;  // per graph input: its slot in input_sources_, or -1
  std::vector<int> guard_slots_;  // per graph input: its slot in the guards' sources, or -1
};

}  // namespace dynvm::runtime
