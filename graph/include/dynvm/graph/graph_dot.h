// Graphviz export of a graph: inputs, operator nodes with their output types, outputs,
// fused groups as clusters and extern calls marked.
#pragma once

#include <functional>
#include <string>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

struct DotOptions {
  std::string graph_name = "dynvm";
  // Nodes given the same non-negative group are drawn in one cluster (a fused group);
  // a negative group, or no function, draws the node on its own.
  std::function<int(const Node&)> group_of;
  // Nodes for which this returns true are extern calls (run through ATen, not fused):
  // drawn filled in salmon, their label starting "extern".
  std::function<bool(const Node&)> is_extern;
  // What a group's cluster says after "group N" (e.g. "cuda kernel"); none: nothing.
  std::function<std::string(int group)> group_note;
};

// A `digraph` in the DOT language; deterministic for a given graph. Calls of fused groups
// in an outer graph (`dynvm::fused`, fusion_partition.h) are drawn as bold yellow boxes
// labelled with their group.
std::string to_dot(const Graph& graph, const DotOptions& options = {});

}  // namespace dynvm::graph
