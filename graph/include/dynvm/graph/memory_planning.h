// Memory planning: intermediate buffers of an outer graph assigned to reusable slots by
// liveness, so the runtime allocates a few slots once instead of a buffer per value.
#pragma once

#include <cstddef>
#include <cstdint>
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

// Plans the fresh tensor outputs of `graph`'s nodes (fused-group calls write theirs,
// extern calls may fill theirs through out= variants). Views and may-alias results share
// their base's buffer and extend its life. A buffer is reused by a later value of the
// same device that needs at most its size (best fit), once the last reader of the earlier
// one has run; a node never writes a slot it reads. Sizes are storage extents rounded up
// to 64 bytes. Graph inputs are the caller's.
MemoryPlan plan_memory(const Graph& graph);

// "slot 0: 512 bytes cpu: %1 [0-2], %4 [3-5]" lines, values named as in `graph`.
std::string to_text(const Graph& graph, const MemoryPlan& plan);

}  // namespace dynvm::graph
