// Fusion partitioning: groups of primitive nodes (primitive_ops.h) that run as one kernel,
// each extractable as a standalone Graph, and the outer graph that calls them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/graph/graph_dot.h"

namespace dynvm::graph {

// The operator of a group's call in the outer graph: `dynvm::fused(%a, %b, group=0)`,
// one output per group output.
inline constexpr std::string_view kFusedOp = "dynvm::fused";

enum class FusionGroupKind : uint8_t {
  Pointwise,  // nodes compute `numel` elements (views included)
  Reduction,  // reductions of `numel` rows of `reduction_numel` elements each, all over
              // the same dimensions of tensors of the same sizes; the other nodes
              // compute numel * reduction_numel elements or numel elements
};
// Either kind may also hold broadcast operands: small pointwise nodes read only inside
// the group (batch norm's per-channel scale), computing fewer elements than the group
// iterates over; their results broadcast like the group's smaller inputs.

std::string_view fusion_group_kind_name(FusionGroupKind kind);

struct FusionGroup {
  size_t id = 0;
  FusionGroupKind kind = FusionGroupKind::Pointwise;
  int64_t numel = 0;
  int64_t reduction_numel = 1;  // 1 for pointwise groups
  // The iteration space: a pointwise group's full-size node output sizes, or the sizes
  // of the tensors its reductions reduce, with the reduced dimensions (sorted).
  std::vector<int64_t> sizes;
  std::vector<int64_t> reduction_dims;
  std::vector<const Node*> nodes;     // program order
  std::vector<const Value*> inputs;   // defined outside the group, in order of first use
  std::vector<const Value*> outputs;  // used outside the group or returned, program order
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // numbered in program order of their first node
  std::vector<int> group_of_node;   // by node id: the group, or -1 (run through ATen)

  int group_of(const Node& node) const {
    return node.id() < group_of_node.size() ? group_of_node[node.id()] : -1;
  }
};

// Groups the primitive nodes of `graph` (which should be functional: see functionalize.h)
// along producer-consumer edges: pointwise chains of one size, and reductions with their
// pointwise producers and consumers (a whole softmax or layer_norm is one group). A merge
// that would let a path leave a group and come back (through an extern node or another
// group) is refused, so the outer graph stays acyclic. Groups of views alone are not
// made, and views of group values read only outside the group leave it: views outside
// groups run through ATen, where they cost nothing. Nodes with side
// effects (mutations functionalization left, write-back copies, random draws, opaque
// calls) are barriers: no group spans one, and the outer graph keeps every node between
// the same barriers as before.
FusionPlan partition_for_fusion(const Graph& graph);

// The group as a standalone graph (the contract with code generation): inputs %in0,
// %in1, ... are the group's inputs in order, its nodes are primitives, its outputs are
// the group's outputs in order.
Graph extract_group(const Graph& graph, const FusionGroup& group);

// `graph` with every group replaced by one kFusedOp node, in a topological order that
// keeps the original order where it can.
Graph build_outer_graph(const Graph& graph, const FusionPlan& plan);

// Every group: kind, sizes, inputs and outputs named as in `graph`, and its extracted
// graph. Deterministic, for tests and logs.
std::string to_text(const Graph& graph, const FusionPlan& plan);

// Graphviz options drawing the plan's groups as clusters and marking extern calls; they
// refer to `plan`, which must outlive them.
DotOptions fusion_dot_options(const FusionPlan& plan);

}  // namespace dynvm::graph
