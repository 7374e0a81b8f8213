// Reading the graph text format (docs/graph_ir.md) back into a Graph.
#pragma once

#include <string_view>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// Parses one graph. On malformed text the Error says where ("3:17: ...") and what was
// expected; no input makes it crash. Node outputs may be named freely (%0, %conv1_out);
// the printer renumbers them.
Expected<Graph> parse_graph(std::string_view text);

}  // namespace dynvm::graph
