// Graphviz export: node labels, edges, inputs and outputs, clusters for groups.
#include "dynvm/graph/graph_dot.h"

#include "catch.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::parse;

TEST_CASE("the Graphviz export labels ops with their output types and groups clusters") {
  Graph g = parse(
      "graph(%x: f32[2] cpu):\n"
      "  %0: f32[2] cpu = aten::relu(%x)\n"
      "  %1: f32[] cpu, %2: i64[] cpu = aten::max.dim(%0, 0)\n"
      "  %3: f32[] cpu = aten::mul.Tensor(%1, %1)\n"
      "  return (%3, %2)\n");
  DotOptions options;
  options.group_of = [](const Node& n) { return n.op() == "aten::relu" ? -1 : 4; };
  CHECK(to_dot(g, options) ==
        "digraph \"dynvm\" {\n"
        "  node [shape=box, fontname=\"monospace\"];\n"
        "  in0 [label=\"%x\\nf32[2] cpu\", shape=ellipse, style=filled, fillcolor=lightblue];\n"
        "  n0 [label=\"aten::relu\\n%0: f32[2] cpu\"];\n"
        "  n1 [label=\"aten::max.dim\\n%1: f32[] cpu\\n%2: i64[] cpu\"];\n"
        "  n2 [label=\"aten::mul.Tensor\\n%3: f32[] cpu\"];\n"
        "  subgraph cluster_4 {\n"
        "    label=\"group 4\"; style=dashed;\n"
        "    n1;\n"
        "    n2;\n"
        "  }\n"
        "  out0 [label=\"return 0\", shape=ellipse, style=filled, fillcolor=palegreen];\n"
        "  out1 [label=\"return 1\", shape=ellipse, style=filled, fillcolor=palegreen];\n"
        "  in0 -> n0;\n"
        "  n0 -> n1;\n"
        "  n1 -> n2 [label=\"%1\"];\n"
        "  n2 -> out0;\n"
        "  n1 -> out1 [label=\"%2\"];\n"
        "}\n");
  CHECK(to_dot(g).find("cluster") == std::string::npos);
  options.group_note = [](int group) { return group == 4 ? "cuda kernel" : ""; };
  CHECK(to_dot(g, options).find("    label=\"group 4: cuda kernel\"; style=dashed;\n") !=
        std::string::npos);
}
