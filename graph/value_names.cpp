// Deterministic printed names of values.
#include "dynvm/graph/value_names.h"

namespace dynvm::graph {

ValueNames::ValueNames(const Graph& graph) : graph_(graph), numbers_(graph.num_values(), -1) {
  int64_t next = 0;
  for (const Node* node : graph.nodes()) {
    for (const Value* out : node->outputs()) numbers_[out->id()] = next++;
  }
}

std::string ValueNames::operator()(const Value* value) const {
  if (!graph_.owns(value)) return "%<foreign>";
  if (value->is_input()) return "%" + value->name();
  int64_t number = numbers_[value->id()];
  if (number < 0) return "%<removed v" + std::to_string(value->id()) + ">";
  return "%" + std::to_string(number);
}

}  // namespace dynvm::graph
