// verify(): checks the invariants every pass must preserve.
#pragma once

#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// One Error per problem, in a deterministic order; empty when the graph is well formed:
// every value is defined once and before its uses, nothing reads an output of a removed
// node or a value of another graph, the graph outputs are defined, tensor values carry
// metadata that is self-consistent, operator and keyword names are well formed, and the
// use lists agree with the arguments.
std::vector<Error> verify(const Graph& graph);

}  // namespace dynvm::graph
