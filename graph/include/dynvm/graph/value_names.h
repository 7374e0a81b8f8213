// ValueNames: how the graph text names values — inputs by name, node outputs %0, %1, …
// numbered in program order — shared by the printer, the verifier and the Graphviz export.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

class ValueNames {
 public:
  // Numbers the outputs of the graph's live nodes; the graph must outlive this object.
  explicit ValueNames(const Graph& graph);

  // "%x", "%3"; for a value the text would not define, a name the parser rejects:
  // "%<removed v7>" (output of a removed node), "%<foreign>" (a value of another graph).
  std::string operator()(const Value* value) const;

 private:
  const Graph& graph_;
  std::vector<int64_t> numbers_;  // by value id: the printed number, -1 when not numbered
};

}  // namespace dynvm::graph
