// The Graph API: building, use lists, replacing uses, removing and moving nodes, cloning.
#include "dynvm/graph/graph.h"

#include "catch.h"
#include "dynvm/graph/check.h"
#include "dynvm/graph/verify.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::f32;

TEST_CASE("a graph built through the API prints as text") {
  Graph g;
  Value* x = g.add_input("x", f32({2, 3}));
  Value* w = g.add_input(
      "w", ValueType::tensor(TensorMeta::contiguous(DType::Float32, {4, 3}, Device::cpu(), true)));
  TensorMeta transposed = TensorMeta::contiguous(DType::Float32, {3, 4});
  transposed.strides = {1, 3};
  Node* t = g.append("aten::t", {w}, {ValueType::tensor(transposed)});
  Node* mm = g.append("aten::mm", {x, t->output()}, {f32({2, 4})});
  Node* add = g.append("aten::add.Tensor", {mm->output(), Argument::real(1.0)}, {f32({2, 4})},
                       {{"alpha", Argument::integer(1)}});
  g.set_outputs({add->output()});
  CHECK(to_text(g) ==
        "graph(%x: f32[2, 3] cpu, %w: f32[4, 3] cpu grad):\n"
        "  %0: f32[3, 4]{1, 3} cpu = aten::t(%w)\n"
        "  %1: f32[2, 4] cpu = aten::mm(%x, %0)\n"
        "  %2: f32[2, 4] cpu = aten::add.Tensor(%1, 1.0, alpha=1)\n"
        "  return (%2)\n");
  CHECK(verify(g).empty());
}

TEST_CASE("value and node ids are dense in creation order") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.append("aten::relu", {x}, {f32({2})});
  Node* b = g.append("aten::max.dim", {x, Argument::integer(0)}, {f32({}), f32({})});
  CHECK(x->id() == 0);
  CHECK(a->output()->id() == 1);
  CHECK(b->output(0)->id() == 2);
  CHECK(b->output(1)->id() == 3);
  CHECK(a->id() == 0);
  CHECK(b->id() == 1);
  CHECK(g.num_values() == 4);
  CHECK(g.value(3) == b->output(1));
  CHECK(b->output(1)->producer() == b);
  CHECK(b->output(1)->output_index() == 1);
}

TEST_CASE("use lists count every occurrence, nested lists included") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  Value* y = g.add_input("y", f32({2}));
  Node* cat =
      g.append("aten::cat", {Argument::value_list({x, y, x}), Argument::integer(0)}, {f32({6})});
  Node* mul = g.append("aten::mul.Tensor", {x, x}, {f32({2})});
  g.set_outputs({cat->output(), cat->output()});
  CHECK(x->users().size() == 4);
  CHECK(y->users().size() == 1);
  CHECK(cat->output()->num_output_uses() == 2);
  CHECK(mul->input_values() == std::vector<Value*>{x, x});

  mul->set_arg(1, y);
  CHECK(x->users().size() == 3);
  CHECK(y->users().size() == 2);
  mul->set_kwarg("alpha", Argument::value(y));
  CHECK(y->users().size() == 3);
  CHECK(mul->kwarg("alpha") != nullptr);
  CHECK(mul->kwarg("beta") == nullptr);
  CHECK(verify(g).empty());
}

TEST_CASE("replace_all_uses_with rewrites arguments and outputs") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.append("aten::relu", {x}, {f32({2})});
  Node* b = g.append("aten::relu", {x}, {f32({2})});
  Node* c =
      g.append("aten::stack", {Argument::value_list({b->output(), a->output()})}, {f32({2, 2})});
  g.set_outputs({b->output(), c->output()});
  g.replace_all_uses_with(b->output(), a->output());
  CHECK_FALSE(b->output()->has_uses());
  CHECK(a->output()->users().size() == 2);
  CHECK(a->output()->num_output_uses() == 1);
  g.remove(b);
  CHECK(to_text(g) ==
        "graph(%x: f32[2] cpu):\n"
        "  %0: f32[2] cpu = aten::relu(%x)\n"
        "  %1: f32[2, 2] cpu = aten::stack([%0, %0])\n"
        "  return (%0, %1)\n");
  CHECK(verify(g).empty());
}

TEST_CASE("removing the node being visited keeps the iteration going") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  for (int i = 0; i < 5; ++i) g.append("aten::relu", {x}, {f32({2})});
  int visited = 0;
  for (Node* node : g.nodes()) {
    ++visited;
    if (node->id() % 2 == 0) g.remove(node);
  }
  CHECK(visited == 5);
  CHECK(g.num_nodes() == 2);
  CHECK(x->users().size() == 2);
  CHECK(g.first_node()->id() == 1);
  CHECK(g.last_node()->id() == 3);
}

TEST_CASE("insert_before and move_before edit program order") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.append("aten::relu", {x}, {f32({2})});
  Node* b = g.append("aten::neg", {x}, {f32({2})});
  Node* c = g.insert_before(a, "aten::sin", {x}, {f32({2})});
  std::vector<size_t> ids;
  for (const Node* n : g.nodes()) ids.push_back(n->id());
  CHECK(ids == std::vector<size_t>{c->id(), a->id(), b->id()});
  g.move_before(c, nullptr);
  g.move_before(b, a);
  ids.clear();
  for (const Node* n : g.nodes()) ids.push_back(n->id());
  CHECK(ids == std::vector<size_t>{b->id(), a->id(), c->id()});
  CHECK(g.first_node() == b);
  CHECK(g.last_node() == c);
  CHECK(c->prev() == a);
}

TEST_CASE("clone copies live nodes with fresh dense ids") {
  Graph g = dynvm::graph::test::parse(
      "graph(%x: f32[2] cpu, %n: int):\n"
      "  %0: f32[2] cpu = aten::relu(%x)\n"
      "  %1: f32[2] cpu = aten::neg(%0)\n"
      "  %2: f32[4] cpu = aten::cat([%0, %1], dim=0)\n"
      "  return (%2, %n)\n");
  // Remove aten::neg, then make aten::cat read only aten::relu's output.
  g.remove(g.first_node()->next());
  Node* cat = g.first_node()->next();
  cat->set_kwarg("dim", Argument::integer(-1));
  cat->set_arg(0, Argument::value_list({g.first_node()->output()}));
  Graph copy = g.clone();
  CHECK(copy.num_values() == 4);
  CHECK(copy.num_node_ids() == 2);
  CHECK(to_text(copy) == to_text(g));
  CHECK(verify(copy).empty());
  Graph moved = std::move(copy);
  CHECK(to_text(moved) == to_text(g));
}

TEST_CASE("misusing the API is an internal error, not a crash") {
  Graph g;
  Value* x = g.add_input("x", f32({2}));
  Graph other;
  Value* foreign = other.add_input("y", f32({2}));
  CHECK_THROWS_AS(g.add_input("x", f32({2})), InternalError);
  CHECK_THROWS_AS(g.add_input("0x", f32({2})), InternalError);
  CHECK_THROWS_AS(g.append("aten::relu", {foreign}, {f32({2})}), InternalError);
  CHECK_THROWS_AS(g.set_outputs({foreign}), InternalError);
  Node* a = g.append("aten::relu", {x}, {f32({2})});
  CHECK_THROWS_AS(a->output(1), InternalError);
  CHECK_THROWS_AS(a->arg(3), InternalError);
  CHECK_THROWS_AS(a->arg(0).as_int(), InternalError);
  g.remove(a);
  CHECK_THROWS_AS(g.remove(a), InternalError);
  CHECK_THROWS_AS(g.insert_before(a, "aten::neg", {x}, {f32({2})}), InternalError);
  // The failed append left nothing behind.
  CHECK(g.num_nodes() == 0);
  CHECK(x->users().empty());
}

TEST_CASE("row-major strides count sizes of 0 and 1 as 1") {
  CHECK(row_major_strides({2, 3, 4}) == std::vector<int64_t>{12, 4, 1});
  CHECK(row_major_strides({2, 0, 4}) == std::vector<int64_t>{4, 4, 1});
  CHECK(row_major_strides({}).empty());
  TensorMeta m = TensorMeta::contiguous(DType::Int64, {3, 1});
  CHECK(m.has_row_major_strides());
  CHECK(m.numel() == 3);
  CHECK(TensorMeta::contiguous(DType::Int64, {3, 1}).strides == std::vector<int64_t>{1, 1});
  m.strides = {2, 1};
  CHECK_FALSE(m.has_row_major_strides());
}

TEST_CASE("devices print and parse") {
  CHECK(to_string(Device::cuda(1)) == "cuda:1");
  CHECK(to_string(Device::cpu()) == "cpu");
  CHECK(to_string(Device::meta()) == "meta");
  CHECK(parse_device("cuda:0") == Device::cuda(0));
  CHECK(parse_device("meta") == Device::meta());
  CHECK_FALSE(parse_device("cuda:").has_value());
  CHECK_FALSE(parse_device("cuda:-1").has_value());
  CHECK_FALSE(parse_device("tpu").has_value());
  CHECK_FALSE(parse_device("cuda:99999999999").has_value());
}
