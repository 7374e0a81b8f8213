// The graph text format (docs/graph_ir.md): printing graphs, types and arguments.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

#include "dynvm/graph/graph.h"
#include "dynvm/graph/value_names.h"

namespace dynvm::graph {

// The whole graph; parse_graph() reads it back to a graph that prints identically.
std::string to_text(const Graph& graph);
std::ostream& operator<<(std::ostream& out, const Graph& graph);

// One node as the graph text prints it, without indentation or newline.
std::string to_text(const Node& node, const ValueNames& names);
// "f32[2, 3]{1, 2} cuda:0 grad", "Tensor", "int".
std::string to_text(const ValueType& type);
// "%x", "[1, -2]", "torch.float32", "\"floor\"", "None".
std::string to_text(const Argument& argument, const ValueNames& names);

// The shortest text that reads back as the same double, always marked as a double
// ("1.0", "0.1", "1e+20", "-0.0", "inf", "-inf", "nan").
std::string format_double(double value);
// A double-quoted string with \" \\ \n \t \r escaped and other bytes outside printable
// ASCII written as \xHH.
std::string quote_string(std::string_view text);

}  // namespace dynvm::graph
