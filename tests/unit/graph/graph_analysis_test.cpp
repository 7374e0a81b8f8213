// Topological order, reachability and alias classes over small graphs.
#include "dynvm/graph/graph_analysis.h"

#include <algorithm>

#include "catch.h"
#include "dynvm/graph/alias_analysis.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::parse;

namespace {

const char* const kDiamond =
    "graph(%x: f32[2] cpu):\n"
    "  %0: f32[2] cpu = aten::relu(%x)\n"            // a
    "  %1: f32[2] cpu = aten::sin(%0)\n"             // b
    "  %2: f32[2] cpu = aten::cos(%0)\n"             // c
    "  %3: f32[2] cpu = aten::add.Tensor(%1, %2)\n"  // d
    "  %4: f32[2] cpu = aten::neg(%x)\n"             // e, on its own
    "  return (%3)\n";

std::vector<std::string> ops(const std::vector<Node*>& nodes) {
  std::vector<std::string> names;
  for (const Node* n : nodes) names.push_back(n->op());
  return names;
}

}  // namespace

TEST_CASE("topological order puts producers first, even after reordering") {
  Graph g = parse(kDiamond);
  // Scramble program order: add first, relu last.
  g.move_before(g.first_node(), nullptr);
  g.move_before(g.node(3), g.first_node());
  auto order = topological_order(g);
  REQUIRE(order.ok());
  std::vector<std::string> names = ops(*order);
  REQUIRE(names.size() == 5);
  auto index = [&](const std::string& op) {
    return std::find(names.begin(), names.end(), op) - names.begin();
  };
  CHECK(index("aten::relu") < index("aten::sin"));
  CHECK(index("aten::relu") < index("aten::cos"));
  CHECK(index("aten::sin") < index("aten::add.Tensor"));
  CHECK(index("aten::cos") < index("aten::add.Tensor"));
  // Deterministic: the same graph gives the same order.
  CHECK(ops(*topological_order(g)) == names);
}

TEST_CASE("a cycle in the data flow is an error naming a node on it") {
  Graph g = parse(kDiamond);
  g.first_node()->set_arg(0, g.node(3)->output());  // relu now reads add
  auto order = topological_order(g);
  REQUIRE_FALSE(order.ok());
  CHECK(order.error().message == "the data flow has a cycle through node #0 (aten::relu)");
  Graph self = parse("graph(%x: f32[2] cpu):\n  %0: f32[2] cpu = aten::relu(%x)\n  return (%0)\n");
  self.first_node()->set_arg(0, self.first_node()->output());
  CHECK_FALSE(topological_order(self).ok());
}

TEST_CASE("reachability follows data flow forward and backward") {
  Graph g = parse(kDiamond);
  Node* relu = g.node(0);
  Node* sin = g.node(1);
  Node* add = g.node(3);
  Node* neg = g.node(4);
  NodeSet forward = reachable_from(g, {sin}, FlowDirection::Forward);
  CHECK(forward.contains(sin));
  CHECK(forward.contains(add));
  CHECK_FALSE(forward.contains(relu));
  NodeSet backward = reachable_from(g, {add}, FlowDirection::Backward);
  for (int id : {0, 1, 2, 3}) CHECK(backward.contains(g.node(id)));
  CHECK_FALSE(backward.contains(neg));
  NodeSet none = reachable_from(g, {}, FlowDirection::Forward);
  CHECK_FALSE(none.contains(relu));
}

TEST_CASE("alias classes join views, in-place results and inputs") {
  Graph g = parse(
      "graph(%x: f32[4] cpu, %y: f32[4] cpu):\n"
      "  %0: f32[2, 2] cpu = aten::view(%x, [2, 2])\n"
      "  %1: f32[4] cpu = aten::relu(%x)\n"
      "  %2: f32[4] cpu = aten::add_.Tensor(%1, %y)\n"
      "  %3: f32[4] cpu = aten::sin(%1)\n"
      "  %4: f32[4] cpu = aten::mul.out(%3, 2, out=%3)\n"
      "  return (%0, %2, %4)\n");
  AliasAnalysis aliases(g);
  Value* x = g.inputs()[0];
  Value* y = g.inputs()[1];
  CHECK(aliases.may_alias(x, y));  // the caller may pass one tensor twice
  CHECK(aliases.may_alias(x, g.node(0)->output()));
  CHECK_FALSE(aliases.may_alias(x, g.node(1)->output()));
  CHECK(aliases.may_alias(g.node(1)->output(), g.node(2)->output()));
  CHECK(aliases.may_alias(g.node(3)->output(), g.node(4)->output()));
  size_t relu_class = aliases.alias_class(g.node(1)->output());
  CHECK(aliases.written_between(relu_class, 1, 3));
  CHECK_FALSE(aliases.written_between(relu_class, 2, 3));
  CHECK(aliases.written_after(relu_class, 1));
  CHECK_FALSE(aliases.written_after(relu_class, 2));
  CHECK_FALSE(aliases.written_after(aliases.alias_class(x), 0));
  CHECK(aliases.written_after(aliases.alias_class(g.node(3)->output()), 3));
}
