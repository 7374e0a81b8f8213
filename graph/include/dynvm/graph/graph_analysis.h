// Order and reachability over a graph's data flow (producer → consumer edges among the
// live nodes), computed with Boost.Graph; Boost stays out of this header.
#pragma once

#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

enum class FlowDirection {
  Forward,   // from a node to the nodes that read its outputs
  Backward,  // from a node to the nodes that produce its inputs
};

// A set of nodes of one graph, indexed by node id.
class NodeSet {
 public:
  explicit NodeSet(size_t num_node_ids) : member_(num_node_ids, false) {}
  bool contains(const Node* node) const {
    return node->id() < member_.size() && member_[node->id()];
  }
  void insert(const Node* node) { member_.at(node->id()) = true; }

 private:
  std::vector<bool> member_;
};

// The live nodes, each after the producers of its inputs; deterministic for a given
// graph. Fails, naming a node, when the data flow has a cycle.
Expected<std::vector<Node*>> topological_order(const Graph& graph);

// The live nodes reachable from `from` (included) along data-flow edges.
NodeSet reachable_from(const Graph& graph, const std::vector<const Node*>& from,
                       FlowDirection direction);

}  // namespace dynvm::graph
