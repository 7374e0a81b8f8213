// The verifier: each invariant broken on purpose is reported in words naming the culprit.
#include "dynvm/graph/verify.h"

#include "catch.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::f32;
using dynvm::graph::test::parse;

namespace {

std::vector<std::string> problems(const Graph& g) {
  std::vector<std::string> messages;
  for (const dynvm::Error& e : verify(g)) messages.push_back(e.message);
  return messages;
}

}  // namespace

TEST_CASE("a well-formed graph has no problems") {
  Graph g = parse(
      "graph(%x: f32[2] cpu, %n: int):\n"
      "  %0: f32[2] cpu = aten::relu(%x)\n"
      "  aten::add_.Tensor(%0, %x)\n"
      "  return (%0, %n, %x)\n");
  CHECK(problems(g).empty());
}

TEST_CASE("a use before the definition is reported") {
  Graph g = parse(
      "graph(%x: f32[2] cpu):\n"
      "  %0: f32[2] cpu = aten::relu(%x)\n"
      "  %1: f32[2] cpu = aten::neg(%0)\n"
      "  return (%1)\n");
  g.move_before(g.last_node(), g.first_node());
  CHECK(problems(g) ==
        std::vector<std::string>{"node #0 (%0 = aten::neg): reads %1 before its definition"});
}

TEST_CASE("a node reading its own output is reported") {
  Graph g = parse("graph(%x: f32[2] cpu):\n  %0: f32[2] cpu = aten::relu(%x)\n  return (%0)\n");
  Node* relu = g.first_node();
  relu->set_arg(0, relu->output());
  CHECK(problems(g) ==
        std::vector<std::string>{"node #0 (%0 = aten::relu): reads %0 before its definition"});
}

TEST_CASE("uses of a removed node's outputs are reported, in nodes and in outputs") {
  Graph g = parse(
      "graph(%x: f32[2] cpu):\n"
      "  %0: f32[2] cpu = aten::relu(%x)\n"
      "  %1: f32[2] cpu = aten::neg(%0)\n"
      "  return (%1, %0)\n");
  g.remove(g.first_node());
  CHECK(problems(g) == std::vector<std::string>{
                           "node #0 (%0 = aten::neg): reads %<removed v1>, an output of the "
                           "removed node aten::relu",
                           "graph output 1 is %<removed v1>, an output of the removed node "
                           "aten::relu",
                       });
}

TEST_CASE("tensor values without metadata are reported where a primitive reads them") {
  Graph g = parse(
      "graph(%x: Tensor, %l: Tensor[]):\n"
      "  %0: Tensor, %1: int = aten::foo(%x, %l)\n"
      "  %2: f32[2] cpu = aten::neg(%0)\n"
      "  return (%2)\n");
  CHECK(problems(g) == std::vector<std::string>{
                           "node #0 (%0, %1 = aten::foo): tensor %0 has no metadata (dtype, "
                           "device, sizes)",
                       });
}

TEST_CASE("tensor values without metadata may flow between operators ATen runs") {
  // An undefined result or a kernel's random state (CUDA's flash attention), passed to
  // another extern operator, returned, or taken as an input (a backward's saved state).
  Graph g = parse(
      "graph(%x: Tensor, %y: f32[2] cpu):\n"
      "  %0: f32[2] cpu, %1: Tensor = aten::foo(%x, %y)\n"
      "  %2: f32[2] cpu = aten::bar(%1, %0)\n"
      "  return (%2, %1)\n");
  CHECK(problems(g).empty());
}

TEST_CASE("inconsistent metadata is reported") {
  Graph g;
  Value* x = g.add_input("x", f32({2, 3}));
  TensorMeta bad = TensorMeta::contiguous(DType::Float32, {2, 3});
  bad.strides = {1};
  Node* n = g.append("aten::relu", {x}, {ValueType::tensor(bad)});
  ValueType scalar_with_meta = f32({});
  scalar_with_meta.kind = ValueKind::Int;
  Node* m = g.append("aten::numel", {x}, {scalar_with_meta});
  g.set_outputs({n->output(), m->output()});
  CHECK(problems(g) == std::vector<std::string>{
                           "node #0 (%0 = aten::relu): %0 has 2 sizes but 1 strides",
                           "node #1 (%1 = aten::numel): %1 is not a tensor but has tensor metadata",
                       });
}

TEST_CASE("malformed operator and keyword names are reported") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  g.append("relu", {x}, {f32({2})});
  g.append("aten::relu.", {x}, {f32({2})}, {{"bad name", Argument::integer(1)}});
  g.append("aten::x", {x}, {}, {{"a", Argument::none()}, {"a", Argument::none()}});
  CHECK(problems(g) ==
        std::vector<std::string>{
            "node #0 (%0 = relu): operator name 'relu' is not of the form ns::name[.overload]",
            "node #1 (%1 = aten::relu.): operator name 'aten::relu.' is not of the form "
            "ns::name[.overload]",
            "node #1 (%1 = aten::relu.): invalid keyword name 'bad name'",
            "node #2 (aten::x): keyword 'a' given twice",
        });
}
