// Memory planning: intermediate buffers of an outer graph assigned to reusable slots by
// liveness, so the runtime allocates a few slots once instead of a buffer per value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// One allocation the runtime makes per run: `bytes` on `device`.
struct BufferSlot {
  size_t id = 0;
  Device device;
  int64_t bytes = 0;
};

// A value whose storage lives in a slot from the node defining it (program position
// `defined_at`) through the last node reading it or a view of it (`last_use`).
struct BufferAssignment {
  size_t value_id = 0;
  size_t slot = 0;
  int64_t bytes = 0;  // the value's own extent, at most the slot's size
  size_t defined_at = 0;
  size_t last_use = 0;
};

struct MemoryPlan {
  std::vector<BufferSlot> slots;
  std::vector<BufferAssignment> buffers;  // in order of definition
  // Fresh tensors the caller receives (graph outputs and what they view): allocated per
  // run and handed over, never reused. By value id, in order of definition.
  std::vector<size_t> caller_owned;

  int64_t slot_bytes() const;    // what the plan allocates
  int64_t buffer_bytes() const;  // what one buffer per value would allocate
  // The assignment of a value, or nullptr when it has no slot (views, inputs, outputs).
  const BufferAssignment* find(const Value& value) const;
};

// How a node's tensor outputs get their storage, as far as planning is concerned.
enum class OutputStorage : uint8_t {
  Planned,       // fresh tensors the runtime places in planned slots
  Fresh,         // fresh tensors the node allocates itself: no slot, no aliasing
  AliasesFirst,  // may share storage with its first tensor argument (each tensor of a
                 // list there): views, may-alias results, in-place results
  AliasesAny,    // may share storage with any tensor it reads: out variants, opaque ops
};

// Fused-group calls and known non-aliasing, non-mutating ATen operators are Planned
// (extern calls may fill theirs through out= variants); known views, may-alias and
// in-place results are AliasesFirst; out variants and other namespaces AliasesAny.
OutputStorage default_output_storage(const Node& node);

// Plans the outputs of `graph`'s nodes that `storage` says are Planned. Aliasing results
// share their bases' buffers and extend their lives. A buffer is reused by a later value
// of the same device that needs at most its size (best fit), once the last reader of the
// earlier one has run; a node never writes a slot it reads. Sizes are storage extents
// rounded up to 64 bytes. Graph inputs are the caller's.
MemoryPlan plan_memory(
    const Graph& graph,
    const std::function<OutputStorage(const Node&)>& storage = default_output_storage);

// "slot 0: 512 bytes cpu: %1 [0-2], %4 [3-5]" lines, values named as in `graph`.
std::string to_text(const Graph& graph, const MemoryPlan& plan);

}  // namespace dynvm::graph
