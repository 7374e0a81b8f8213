// AtenExecutor: the "eager" backend — replays a graph node by node through ATen's dispatcher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace at {
class Tensor;
}  // namespace at

namespace dynvm::graph {
struct MemoryPlan;
}  // namespace dynvm::graph

namespace dynvm::codegen {

class FusedKernel;
struct GlueProgram;

class AtenExecutor;

// A functionalized graph that writes final values back into some of its inputs is right only
// while none of those inputs shares memory with another input (functionalize.h): otherwise
// the original graph runs op by op, its in-place operators on the caller's tensors.
struct AliasFallback {
  std::vector<size_t> mutated_inputs;      // graph input indices written back
  const AtenExecutor* op_by_op = nullptr;  // the graph before the passes
};
// Whether an input listed in `mutated` shares storage with another of `inputs`.
bool inputs_overlap(const std::vector<at::Tensor>& inputs, const std::vector<size_t>& mutated);

// Runs a captured graph on real tensors, calling every operator from the top of the
// dispatcher (autograd included), so results, in-place mutations of inputs, view aliasing
// and gradients are those of eager PyTorch. All name lookups and literal conversions
// happen once in build(); run() only fills a stack per node and calls the kernel.
class AtenExecutor {
 public:
  // Runs one fused group (`dynvm::fused(inputs..., group=N)` nodes): its input tensors in,
  // its output tensors out.
  using GroupRunner = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  // Runs one fused group into the tensors given, one per group output with exactly the
  // dtype, sizes and strides of the graph value and overlapping no input, except an output
  // the outer graph marks as written into an input (graph/in_place_outputs.h): that input
  // itself, which the group reads element by element where it stores.
  using GroupIntoRunner =
      std::function<void(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&)>;

  // Resolves every node's operator schema and converts its literal arguments according to
  // the schema. An unknown operator, a wrong argument count or a literal the schema cannot
  // take is an Error naming the node as the graph text prints it; the runtime then falls
  // back to plain eager execution. Graph inputs and outputs must be tensors.
  static Expected<std::unique_ptr<AtenExecutor>> build(const graph::Graph& graph);
  // The same for a graph with fused groups: group N runs `groups[N]`.
  static Expected<std::unique_ptr<AtenExecutor>> build(const graph::Graph& graph,
                                                       std::vector<GroupRunner> groups);
  // The same, applying `memory` (a plan over `graph`): every fused-group output the plan
  // assigns a slot is written by `groups_into[N]` into a view of one arena holding all
  // slots, kept across runs. Assignments the executor cannot honour are ignored (their
  // values are allocated per run): values of other nodes or of groups without an into
  // runner, graph outputs, values not on the CPU or larger than their slot.
  static Expected<std::unique_ptr<AtenExecutor>> build(const graph::Graph& graph,
                                                       std::vector<GroupRunner> groups,
                                                       std::vector<GroupIntoRunner> groups_into,
                                                       const graph::MemoryPlan& memory);

  ~AtenExecutor();
  AtenExecutor(const AtenExecutor&) = delete;
  AtenExecutor& operator=(const AtenExecutor&) = delete;

  // Executes the graph on `inputs` (one per graph input, in order) and returns the graph
  // outputs; an output that is a graph input is the caller's own at::Tensor. Intermediates
  // are released after their last use. The caller's grad mode is restored on return.
  // ATen's errors propagate as C++ exceptions (c10::Error), as does a wrong input count.
  // Safe to call from several threads at once: with planned memory, a run takes the
  // cached arena when no other run holds it and allocates a fresh one otherwise; an arena
  // a caller still holds a view of (which a correct plan never lets happen) is dropped.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  // Graph nodes, the grad-mode switches included.
  size_t num_steps() const;

  // Planned memory: the bytes of one arena (0 without a plan), the fused-group outputs
  // placed in it, and the arenas allocated so far (1 after any number of runs that did
  // not overlap in time).
  int64_t arena_bytes() const;
  size_t planned_outputs() const;
  size_t arena_allocations() const;

  // The run as glue (run_glue.h), for a variant's native function. lower_run_begin appends a
  // call that starts a run (a RunFrame, stored in slot `frame_slot`, which the caller deletes
  // with delete_run_frame whatever the function returns) and returns the value holding it.
  // lower_run_steps then appends every step in order: fused groups with a kernel in
  // `kernel_of_group` (by group number; nullptr: run as in run()) get their outputs allocated
  // and their kernel called from the glue, everything else is one helper call running the
  // step as run() would. Any failure returns `fail_code` with the message in the frame.
  // With `fallback` (whose inputs the frame then keeps: `keep_inputs`), the steps run from
  // one helper that first checks the inputs for overlap and runs fallback->op_by_op instead
  // when they do.
  int lower_run_begin(GlueProgram& program, int64_t frame_slot, int64_t fail_code,
                      bool keep_inputs = false) const;
  void lower_run_steps(GlueProgram& program, int frame, int64_t fail_code,
                       const std::vector<const FusedKernel*>& kernel_of_group,
                       const AliasFallback* fallback = nullptr) const;

  // The prepared steps, and the arena kept across runs with who holds it; defined in
  // aten_plan.h.
  struct Plan;
  struct ArenaCache;

 private:
  explicit AtenExecutor(std::unique_ptr<const Plan> plan);
  static Expected<std::unique_ptr<AtenExecutor>> build_planned(
      const graph::Graph& graph, std::vector<GroupRunner> groups,
      std::vector<GroupIntoRunner> groups_into, const graph::MemoryPlan* memory);

  std::unique_ptr<const Plan> plan_;
  std::unique_ptr<ArenaCache> arenas_;
};

}  // namespace dynvm::codegen
