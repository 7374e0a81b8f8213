// Dead-code elimination by backward reachability from outputs and side effects.
#include "dynvm/graph/dead_code_elimination.h"

#include <vector>

#include "dynvm/graph/graph_analysis.h"
#include "dynvm/graph/op_properties.h"

namespace dynvm::graph {

void dead_code_elimination(Graph& graph) {
  std::vector<const Node*> roots;
  for (const Value* out : graph.outputs()) {
    if (out->producer() != nullptr) roots.push_back(out->producer());
  }
  std::vector<Node*> order;
  for (Node* node : graph.nodes()) {
    order.push_back(node);
    if (op_properties(node->op()).has_side_effects() || node_draws_random(*node)) {
      roots.push_back(node);
    }
  }
  NodeSet live = reachable_from(graph, roots, FlowDirection::Backward);
  // Last to first, so a node's readers are gone before it is.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!live.contains(*it)) graph.remove(*it);
  }
}

}  // namespace dynvm::graph
