// Dead-code elimination: removes nodes whose outputs never reach a graph output.
#pragma once

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// Keeps every node from which a graph output or a node with side effects (in-place,
// out-variant or otherwise mutating, random, effectful, opaque; see op_properties.h)
// can be reached along data flow; removes the rest.
void dead_code_elimination(Graph& graph);

}  // namespace dynvm::graph
