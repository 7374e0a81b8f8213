// The eager backend's prepared steps and the state of one run over them, shared by the
// executor's own loop (aten_executor.cpp) and the run lowered to glue (lower_run_to_glue.cpp),
// so that both execute a step the same way. Private to codegen/.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <c10/core/GradMode.h>
#include <c10/core/Storage.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/codegen/aten_executor.h"
#include "dynvm/graph/tensor_meta.h"

namespace dynvm::codegen {

namespace exec {

// Where a schema argument's IValue comes from when the node runs.
enum class SourceKind : uint8_t {
  kLiteral,             // a constant converted at build time
  kSlot,                // a graph value
  kTensorList,          // Tensor[] assembled from slots
  kOptionalTensorList,  // Tensor?[] assembled from slots and Nones
  kIntList,             // int[] / SymInt[] mixing literal ints and int values
};

struct ArgumentSource {
  SourceKind kind = SourceKind::kLiteral;
  int32_t slot = -1;  // kSlot
  // List kinds: the items are list_items[items_begin, items_end).
  uint32_t items_begin = 0;
  uint32_t items_end = 0;
  c10::IValue literal;  // kLiteral
};

// One item of a list assembled at run time: a slot, or (slot < 0) a literal int, or None
// in a Tensor?[].
struct ListItem {
  int32_t slot = -1;
  int64_t literal = 0;
};

struct Step {
  // Empty for the grad-mode switch and fused groups, which call no operator.
  std::optional<c10::OperatorHandle> op;
  int32_t group = -1;        // a fused group: its runner; the arguments are its input slots
  bool grad_enabled = true;  // the mode a switch sets
  // The single Tensor[] return is spread into the node's outputs, one tensor each.
  bool spread_list = false;
  uint32_t args_begin = 0;
  uint32_t args_end = 0;
  // One slot per node output (-1: the output is never read, drop it).
  uint32_t outputs_begin = 0;
  uint32_t outputs_end = 0;
  // Slots whose last use is this step.
  uint32_t releases_begin = 0;
  uint32_t releases_end = 0;
  // A fused group writing into planned memory: its outputs' placements start here.
  int32_t placements_begin = -1;
  // An operator whose results are fresh by the plan's rules: none may share the arena.
  bool fresh_results = false;
  // The operator picks its results' layout when it runs (graph::OpProperties::
  // run_time_layout): a result laid out otherwise than the graph records (on a dimension
  // longer than 1) is copied into the recorded layout. Its outputs' recorded metas are
  // Plan::result_layouts[layouts_begin + i]; -1: results are left as they come.
  int32_t layouts_begin = -1;
  // graph::kKeptCloneOp: its argument's conversion comes from Plan::kept_clones[kept_clone].
  int32_t kept_clone = -1;
};

// The state of one graph::kKeptCloneOp node: the last conversion and what it was made
// from. Shared by the runs of a plan, which may be on several threads.
class KeptClone {
 public:
  explicit KeptClone(c10::MemoryFormat format) : format_(format) {}
  // `source` converted to the memory format: the kept copy while `source` is the tensor
  // it was made from, with the same data pointer and version; else a new copy, kept.
  // Under grad mode a source that requires grad is copied each time, so that autograd
  // records the copy.
  at::Tensor get(const at::Tensor& source);

 private:
  c10::MemoryFormat format_;
  std::mutex mutex_;
  // Weakly: the source's data is freed with it, while its TensorImpl's address cannot be
  // taken by another tensor that would then look like it.
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> source_{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  const void* data_ = nullptr;
  int64_t version_ = -1;
  at::Tensor converted_;
};

// Where a fused-group output goes when its group runs into given tensors: the tensor in
// slot `input_slot` (an input the group writes in place, graph/in_place_outputs.h), a
// view of the arena at `offset` bytes, or (neither) a fresh tensor on `device`.
struct Placement {
  int32_t input_slot = -1;
  int64_t offset = -1;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// Restores the grad mode found on construction, also when an operator throws.
class GradModeRestorer {
 public:
  GradModeRestorer() : enabled_(c10::GradMode::is_enabled()) {}
  ~GradModeRestorer() { c10::GradMode::set_enabled(enabled_); }
  GradModeRestorer(const GradModeRestorer&) = delete;
  GradModeRestorer& operator=(const GradModeRestorer&) = delete;

 private:
  bool enabled_;
};

}  // namespace exec

struct AtenExecutor::Plan {
  std::vector<AtenExecutor::GroupRunner> groups;
  std::vector<AtenExecutor::GroupIntoRunner> groups_into;
  std::vector<exec::Placement> placements;
  int64_t arena_bytes = 0;
  size_t planned_outputs = 0;
  std::vector<exec::Step> steps;
  std::vector<exec::ArgumentSource> arguments;
  std::vector<exec::ListItem> list_items;
  std::vector<int32_t> output_slots;
  std::vector<std::optional<graph::TensorMeta>> result_layouts;  // see Step::layouts_begin
  std::vector<std::shared_ptr<exec::KeptClone>> kept_clones;     // see Step::kept_clone
  std::vector<int32_t> releases;
  std::vector<int32_t> input_slots;  // per graph input: its slot, -1 when never read
  std::vector<int32_t> graph_output_slots;
  size_t num_slots = 0;
  size_t max_stack = 0;
};

// The arena of planned memory kept between runs. `busy` says a run holds `cached`; only
// that run touches it.
struct AtenExecutor::ArenaCache {
  std::atomic<bool> busy{false};
  c10::Storage cached;
  std::atomic<size_t> allocations{0};
};

namespace exec {

// One run's arena: the cached one when no other run holds it, else a fresh one. Released
// on destruction, also when the run throws. It must outlive every view made of it in the
// run; a view that survives (the caller was handed one) keeps the arena for its holder
// and the next run allocates another, so nothing a caller holds is ever overwritten.
class ArenaLease {
 public:
  ArenaLease(AtenExecutor::ArenaCache& cache, int64_t bytes);
  ~ArenaLease();
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;

  const c10::Storage& storage() const { return holds_cache_ ? cache_.cached : own_; }

 private:
  AtenExecutor::ArenaCache& cache_;
  bool holds_cache_ = false;
  c10::Storage own_;
};

// One run of a plan: its slots (one per graph value), the arena it holds, the operator stack,
// and the caller's grad mode, restored when the run ends. Members are destroyed in reverse:
// the slots (views of the arena among them) before the arena.
class RunState {
 public:
  RunState(const AtenExecutor::Plan& plan, AtenExecutor::ArenaCache& arenas);
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  const AtenExecutor::Plan& plan;
  std::optional<ArenaLease> arena;
  std::vector<c10::IValue> slots;
  torch::jit::Stack stack;
  std::optional<GradModeRestorer> restore_grad_mode{std::in_place};
};

// Runs `step` (of state.plan): its operator, fused group or grad-mode switch, with its
// results put in their slots and the slots it reads last released. ATen's errors propagate
// as C++ exceptions.
void run_step(RunState& state, const Step& step);

// Releases the slots whose last use is `step`.
void release_last_uses(RunState& state, const Step& step);

// A tensor over `arena` laid out as `placement` says.
at::Tensor arena_view(const c10::Storage& arena, const Placement& placement);

// The tensor a fused-group output is written into: the input the placement names, a view
// of the run's arena, or a fresh tensor (also when the run has no arena).
at::Tensor placed_output(const RunState& state, const Placement& placement);

}  // namespace exec

// A run started by glue (run_glue.h): the run's state, and the message of the step that failed.
class RunFrame {
 public:
  RunFrame(const AtenExecutor::Plan& plan, AtenExecutor::ArenaCache& arenas)
      : state(plan, arenas) {}

  exec::RunState state;
  // Kernel outputs no later step reads, kept alive until their step ends.
  std::vector<at::Tensor> unread;
  // Every graph input, when the run may have to go op by op (AliasFallback); else empty.
  std::vector<at::Tensor> inputs;
  std::string error;
  // After run_frame_finish: the graph's outputs; the state's slots and arena are released
  // and the grad mode restored.
  std::optional<std::vector<at::Tensor>> outputs;
};

}  // namespace dynvm::codegen
