// Linear-scan buffer assignment over program positions.
#include "dynvm/graph/memory_planning.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "dynvm/graph/fusion_partition.h"
#include "dynvm/graph/in_place_outputs.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/value_names.h"

namespace dynvm::graph {

namespace {

constexpr int64_t kAlignment = 64;

// Bytes spanned by a tensor's elements, rounded up to kAlignment.
int64_t storage_bytes(const TensorMeta& meta) {
  int64_t extent = 1;
  for (size_t i = 0; i < meta.dim(); ++i) {
    if (meta.sizes[i] == 0) return 0;
    extent += (meta.sizes[i] - 1) * std::max<int64_t>(meta.strides[i], 0);
  }
  int64_t bytes = extent * dtype_itemsize(meta.dtype);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

bool holds_storage(const Value& value) {
  return value.kind() == ValueKind::Tensor || value.kind() == ValueKind::TensorList;
}

// The tensors a node's outputs may share storage with, given how they get it.
std::vector<const Value*> alias_bases(const Node& node, OutputStorage storage) {
  std::vector<const Value*> bases;
  if (storage == OutputStorage::AliasesAny) {
    node.for_each_input([&](const Value* v) {
      if (holds_storage(*v)) bases.push_back(v);
    });
  } else if (storage == OutputStorage::AliasesFirst) {
    auto first_with_tensors = [&](const Argument& arg) {
      if (!bases.empty()) return;
      arg.for_each_value([&](const Value* v) {
        if (holds_storage(*v)) bases.push_back(v);
      });
    };
    for (const Argument& arg : node.args()) first_with_tensors(arg);
    for (const KeywordArgument& kwarg : node.kwargs()) first_with_tensors(kwarg.value);
  }
  return bases;
}

}  // namespace

OutputStorage default_output_storage(const Node& node) {
  if (node.op() == kFusedOp) return OutputStorage::Planned;
  OpProperties props = op_properties(node.op());
  if (!props.known_namespace || props.out_variant) return OutputStorage::AliasesAny;
  if (props.in_place || props.alias != AliasKind::None) return OutputStorage::AliasesFirst;
  return OutputStorage::Planned;
}

int64_t MemoryPlan::slot_bytes() const {
  int64_t total = 0;
  for (const BufferSlot& s : slots) total += s.bytes;
  return total;
}

int64_t MemoryPlan::buffer_bytes() const {
  int64_t total = 0;
  for (const BufferAssignment& b : buffers) total += b.bytes;
  return total;
}

const BufferAssignment* MemoryPlan::find(const Value& value) const {
  for (const BufferAssignment& b : buffers) {
    if (b.value_id == value.id()) return &b;
  }
  return nullptr;
}

MemoryPlan plan_memory(const Graph& graph,
                       const std::function<OutputStorage(const Node&)>& storage) {
  // The storage roots of every value: itself for fresh tensors; for an aliasing result,
  // the roots of every tensor it may share storage with (a list may alias several).
  std::vector<std::vector<size_t>> roots(graph.num_values());
  for (size_t i = 0; i < roots.size(); ++i) roots[i] = {i};
  std::vector<const Node*> order;
  std::vector<bool> planned(graph.num_values(), false);
  for (const Node* node : graph.nodes()) {
    order.push_back(node);
    OutputStorage kind = storage(*node);
    // A group output written into an input in place is that input's storage.
    for (const Value* out : node->outputs()) {
      std::optional<size_t> into = in_place_target(*node, out->output_index());
      if (into && node->arg(*into).is_value())
        roots[out->id()] = roots[node->arg(*into).as_value()->id()];
    }
    if (kind == OutputStorage::Planned) {
      for (const Value* out : node->outputs()) {
        planned[out->id()] = out->meta() != nullptr && !in_place_target(*node, out->output_index());
      }
      continue;
    }
    std::vector<size_t> shared;
    for (const Value* base : alias_bases(*node, kind)) {
      const std::vector<size_t>& more = roots[base->id()];
      shared.insert(shared.end(), more.begin(), more.end());
    }
    if (shared.empty()) continue;
    std::sort(shared.begin(), shared.end());
    shared.erase(std::unique(shared.begin(), shared.end()), shared.end());
    for (const Value* out : node->outputs()) roots[out->id()] = shared;
  }
  // Last use of every root, and which roots the caller keeps.
  std::vector<size_t> last_use(graph.num_values(), 0);
  std::vector<bool> returned(graph.num_values(), false);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const Node* node = order[pos];
    node->for_each_input([&](const Value* v) {
      for (size_t r : roots[v->id()]) last_use[r] = std::max(last_use[r], pos);
    });
    for (const Value* out : node->outputs()) {
      if (planned[out->id()]) last_use[out->id()] = std::max(last_use[out->id()], pos);
    }
  }
  for (const Value* out : graph.outputs()) {
    for (size_t r : roots[out->id()]) returned[r] = true;
  }

  MemoryPlan plan;
  std::vector<bool> slot_free;
  std::vector<std::vector<size_t>> releases(order.size());  // by position: slots freed after it
  for (size_t pos = 0; pos < order.size(); ++pos) {
    for (const Value* out : order[pos]->outputs()) {
      if (!planned[out->id()]) continue;
      if (returned[out->id()]) {
        plan.caller_owned.push_back(out->id());
        continue;
      }
      const TensorMeta& meta = *out->meta();
      int64_t bytes = storage_bytes(meta);
      // Best fit among free slots of the device; a new slot when none is large enough.
      std::optional<size_t> best;
      for (size_t s = 0; s < plan.slots.size(); ++s) {
        if (!slot_free[s] || plan.slots[s].device != meta.device || plan.slots[s].bytes < bytes)
          continue;
        if (!best || plan.slots[s].bytes < plan.slots[*best].bytes) best = s;
      }
      if (!best) {
        best = plan.slots.size();
        plan.slots.push_back(BufferSlot{plan.slots.size(), meta.device, bytes});
        slot_free.push_back(false);
      }
      slot_free[*best] = false;
      plan.buffers.push_back(BufferAssignment{out->id(), *best, bytes, pos, last_use[out->id()]});
      releases[last_use[out->id()]].push_back(*best);
    }
    // Freed only after the node ran: a node never writes a slot it reads.
    for (size_t s : releases[pos]) slot_free[s] = true;
  }
  return plan;
}

std::string to_text(const Graph& graph, const MemoryPlan& plan) {
  ValueNames names(graph);
  std::string text = "memory: " + std::to_string(plan.slots.size()) +
                     (plan.slots.size() == 1 ? " slot, " : " slots, ") +
                     std::to_string(plan.slot_bytes()) + " bytes (" +
                     std::to_string(plan.buffer_bytes()) + " without reuse)\n";
  for (const BufferSlot& slot : plan.slots) {
    text += "  slot " + std::to_string(slot.id) + ": " + std::to_string(slot.bytes) + " bytes " +
            to_string(slot.device) + ":";
    bool first = true;
    for (const BufferAssignment& b : plan.buffers) {
      if (b.slot != slot.id) continue;
      text += std::string(first ? " " : ", ") + names(graph.value(b.value_id)) + " [" +
              std::to_string(b.defined_at) + "-" + std::to_string(b.last_use) + "]";
      first = false;
    }
    text += "\n";
  }
  if (!plan.caller_owned.empty()) {
    text += "  caller-owned:";
    for (size_t i = 0; i < plan.caller_owned.size(); ++i) {
      text += std::string(i ? ", " : " ") + names(graph.value(plan.caller_owned[i]));
    }
    text += "\n";
  }
  return text;
}

}  // namespace dynvm::graph
