// Common-subexpression elimination: merges repeated pure computations.
#pragma once

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// Replaces a node by an earlier one with the same operator, arguments (values and
// literals) and output types. Only pure operators merge (never random, mutating,
// effectful or opaque ones), and never when the shared inputs may be written between
// the two nodes, or when either node's outputs may be written later (one result would
// then stand for two tensors that differ). See alias_analysis.h for "may be written".
void common_subexpression_elimination(Graph& graph);

}  // namespace dynvm::graph
