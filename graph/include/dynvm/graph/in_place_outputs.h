// In-place group outputs: a fused group whose output is only written back into a graph
// input (functionalize.h's write-back) stores it straight into that input, instead of
// into a buffer the write-back then copies (an optimizer step, batch norm's running
// statistics, a cache updated in place).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "dynvm/graph/fusion_partition.h"
#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// The keyword of a kFusedOp node naming, per output, the argument it is written into, or
// -1: `dynvm::fused(%m, %g, %p, group=0, into=[-1, 2])` stores output 1 into %p.
inline constexpr std::string_view kIntoKeyword = "into";

// Marks, in `outer` (build_outer_graph's result), each fused-group output that can be
// written into the input its write-back `aten::copy_(%input, %output)` copies it to. That
// write-back then copies the input onto itself, which ATen skips. An output qualifies when:
// - the write-back is its only use, and it has the input's dtype, sizes, strides and device;
// - its group is pointwise and takes the input as an argument; everything the group
//   computes from it, directly or not, comes from pointwise operators of the output's
//   sizes (no view on the way: each element is read only where the output stores it);
//   and the output depends on it (the load comes before the store);
// - no other argument of the group call is the input or a view of it, and no node
//   between the group call and the write-back reads the input or a view of it (they
//   must see its old contents).
void mark_in_place_outputs(Graph& outer, const FusionPlan& plan, const std::vector<Graph>& groups);

// The argument output `output` of a kFusedOp node is written into, if any.
std::optional<size_t> in_place_target(const Node& node, size_t output);

}  // namespace dynvm::graph
