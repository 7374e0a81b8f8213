// Graphviz export of a graph: inputs, operator nodes with their output types, outputs.
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
};

// A `digraph` in the DOT language; deterministic for a given graph.
std::string to_dot(const Graph& graph, const DotOptions& options = {});

}  // namespace dynvm::graph
