// CompiledGraph: a captured graph made runnable by a backend — "eager" replays it node by
// node through ATen; "dynvm" runs the graph passes (functionalize, decompose, fuse,
// plan), compiles every fused group for its device (a CPU kernel through LLVM, a CUDA
// kernel through NVRTC), and runs the groups as kernels and everything else (matmul,
// convolution, ...) through ATen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/graph/joint_partition.h"
#include "dynvm/support/expected.h"

namespace at {
class Tensor;
}  // namespace at

namespace dynvm::graph {
struct MemoryPlan;
}  // namespace dynvm::graph

namespace dynvm::codegen {

class AtenExecutor;
class FusedKernel;
struct AliasFallback;
struct GlueProgram;

class CompiledGraph;

// A graph autograd records, differentiated and split (graph/joint_partition.h): its
// CompiledGraph runs the forward half, which also returns the values the backward reads;
// `backward` takes those values (info.saved: forward inputs or outputs), then one gradient
// per differentiable output, and returns one gradient per entry of info.grad_inputs.
struct CompiledBackward {
  std::shared_ptr<const CompiledGraph> backward;
  graph::SplitInfo info;
  double forward_compile_ms = 0;   // the forward half's passes and kernels
  double backward_compile_ms = 0;  // differentiation, partition and the backward half's
};

class CompiledGraph {
 public:
  // `backend` is "eager" or "dynvm". With "dynvm", a graph that needs autograd (a value
  // requires grad), is on several CUDA devices or another device, or that the passes cannot
  // lower runs as "eager" would (why() says so); a group that does not compile for its
  // device (no code generator there, or an unsupported op) runs through ATen.
  // `grad_enabled` is the grad mode the graph starts under. `autotune` (mode
  // "max-autotune"): CUDA kernels time their candidate schedules on their first run and
  // keep the fastest (CudaCompileOptions::autotune); CPU kernels have one schedule.
  static Expected<std::unique_ptr<CompiledGraph>> build(const graph::Graph& graph,
                                                        const std::string& backend,
                                                        bool grad_enabled = true,
                                                        bool autotune = false);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  // Same contract as AtenExecutor::run. For a graph that records_autograd(), the fused run
  // records nothing: the runtime wraps it in an autograd node (graph_autograd_node.h).
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  // A graph that autograd records (an input requires grad under grad mode) and that is
  // fused all the same: it writes no input, draws no random number, keeps grad mode as it
  // is, and returns no view of an input, so its backward can recompute it. run() gives its
  // values; run_recording_autograd() runs the graph as traced, op by op, with autograd
  // recording (what the backward differentiates).
  bool records_autograd() const { return records_autograd_; }
  std::vector<at::Tensor> run_recording_autograd(const std::vector<at::Tensor>& inputs) const;
  // Per output of a graph autograd records: whether eager's result requires grad (the
  // traced metadata's flag). The others leave the recomputing node non-differentiable, as
  // eager's `b * 2`, `y.detach() + 1` or `torch.zeros(2)` beside a parameter's use.
  const std::vector<bool>& output_requires_grad() const { return output_requires_grad_; }

  // Set when autograd records the graph and every operator on the way to a gradient has a
  // derivative rule (graph/autodiff.h): the graph then runs as a fused forward half and a
  // fused backward half, and no longer recomputes (records_autograd() stays true). run()
  // gives the graph's outputs; run_saving_for_backward() also the saved values after them.
  const std::shared_ptr<const CompiledBackward>& compiled_backward() const { return backward_; }
  std::vector<at::Tensor> run_saving_for_backward(const std::vector<at::Tensor>& inputs) const;
  // Why a graph autograd records has no compiled backward (empty when it has one or when
  // autograd does not record it).
  const std::string& why_no_compiled_backward() const { return why_no_backward_; }

  // The graph went through the passes (functionalized, fused, planned): its only writes
  // into inputs are those of written_inputs(). False when it runs op by op (why_not_fused).
  bool runs_fused() const { return program_ != nullptr; }
  // The inputs (by position) a fused graph writes back into; empty otherwise.
  std::vector<size_t> written_inputs() const;
  // Whether this call's written inputs share memory with other inputs, so that run()
  // takes the op-by-op path for it.
  bool runs_op_by_op(const std::vector<at::Tensor>& inputs) const;

  // Groups running as kernels (a compiled backward's included).
  size_t kernel_count() const {
    return kernels_.size() + (backward_ ? backward_->backward->kernel_count() : 0);
  }
  size_t group_count() const { return group_count_; }  // fused groups in all
  // Why the graph runs op by op under backend "dynvm" (empty when it is fused).
  const std::string& why_not_fused() const { return why_not_fused_; }
  // The outer graph with its fused groups (for --graphs and DYNVM_LOGS=kernels).
  const graph::Graph* outer_graph() const;
  // The memory plan applied to the outer graph (nullptr when nothing was fused): the
  // outputs of groups running as kernels, in slots of one arena the runs reuse. Extern
  // (ATen) results are allocated by ATen; graph outputs are always fresh.
  const graph::MemoryPlan* memory_plan() const;
  // See AtenExecutor: arena size, outputs placed in it, arenas allocated so far.
  int64_t arena_bytes() const;
  size_t planned_outputs() const;
  size_t arena_allocations() const;
  // The run as glue, kernels called directly (AtenExecutor::lower_run_begin and
  // lower_run_steps; run_glue.h).
  int lower_run_begin(GlueProgram& program, int64_t frame_slot, int64_t fail_code) const;
  void lower_run_steps(GlueProgram& program, int frame, int64_t fail_code) const;
  // Graphviz of what runs: the graph after the passes with every fused group drawn as a
  // cluster and extern calls (ATen) marked; `graph` itself when nothing was fused.
  std::string to_dot(const graph::Graph& graph, const std::string& name) const;

 private:
  CompiledGraph();
  // build(); `joint_half`: the graph is one half of a forward/backward pair, whose values
  // cross between the halves in their recorded layouts (graph::FusionOptions).
  static Expected<std::unique_ptr<CompiledGraph>> build_with(const graph::Graph& graph,
                                                             const std::string& backend,
                                                             bool grad_enabled, bool autotune,
                                                             bool joint_half);

  std::unique_ptr<AtenExecutor> executor_;
  std::vector<std::shared_ptr<FusedKernel>> kernels_;
  std::vector<const FusedKernel*> kernel_of_group_;  // nullptr: the group runs through ATen
  // Set when the passes wrote back into inputs: the original graph, op by op, for calls
  // whose mutated inputs share memory with others (AliasFallback).
  std::unique_ptr<AtenExecutor> op_by_op_;
  std::unique_ptr<AliasFallback> alias_fallback_;
  std::vector<std::unique_ptr<AtenExecutor>> fallback_groups_;
  struct Program;
  std::unique_ptr<Program> program_;
  size_t group_count_ = 0;
  std::string why_not_fused_;
  bool records_autograd_ = false;
  std::unique_ptr<AtenExecutor> recorded_;  // records_autograd_: the graph as traced
  std::vector<bool> output_requires_grad_;  // records_autograd_: see output_requires_grad()
  std::shared_ptr<const CompiledBackward> backward_;
  std::string why_no_backward_;
};

}  // namespace dynvm::codegen
