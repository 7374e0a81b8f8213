// Helpers shared by the graph tests: parse text that must be valid, print, build metadata.
#pragma once

#include <string>
#include <utility>

#include "catch.h"
#include "dynvm/graph/graph.h"
#include "dynvm/graph/graph_parser.h"
#include "dynvm/graph/graph_printer.h"

namespace dynvm::graph::test {

// Parses `text`, failing the test with the parser's message when it is malformed.
inline Graph parse(const std::string& text) {
  Expected<Graph> graph = parse_graph(text);
  INFO(text);
  if (!graph) FAIL(graph.error().message);
  return std::move(graph).value();
}

// The parser's error message for `text`, failing the test when the text parses.
inline std::string parse_error(const std::string& text) {
  Expected<Graph> graph = parse_graph(text);
  INFO(text);
  if (graph) FAIL("parsed, but an error was expected");
  return graph.error().message;
}

inline ValueType f32(std::vector<int64_t> sizes) {
  return ValueType::tensor(TensorMeta::contiguous(DType::Float32, std::move(sizes)));
}

}  // namespace dynvm::graph::test
