// Operator properties from names: the naming rules and the table behind them.
#include "dynvm/graph/op_properties.h"

#include <vector>

#include "dynvm/graph/graph_parser.h"

#include "catch.h"

using namespace dynvm::graph;

TEST_CASE("operator names split into namespace, base and overload") {
  auto name = parse_op_name("aten::add_.Tensor");
  REQUIRE(name);
  CHECK(name->ns == "aten");
  CHECK(name->base == "add_");
  CHECK(name->overload == "Tensor");
  CHECK(parse_op_name("aten::relu")->overload.empty());
  CHECK(parse_op_name("aten::__and__.Scalar")->base == "__and__");
  CHECK_FALSE(parse_op_name("relu"));
  CHECK_FALSE(parse_op_name("aten::"));
  CHECK_FALSE(parse_op_name("aten::relu."));
  CHECK_FALSE(parse_op_name("::relu"));
  CHECK_FALSE(parse_op_name("aten::re lu"));
  CHECK_FALSE(parse_op_name("aten::a.b.c"));
}

TEST_CASE("a base name ending in '_' is in-place, dunders aside") {
  for (const char* op : {"aten::add_.Tensor", "aten::relu_", "aten::copy_", "aten::index_put_",
                         "aten::_foreach_add_.Scalar", "aten::t_", "aten::__iand__.Tensor"}) {
    INFO(op);
    OpProperties p = op_properties(op);
    CHECK(p.in_place);
    CHECK(p.mutates);
    CHECK_FALSE(p.is_pure());
  }
  for (const char* op : {"aten::add.Tensor", "aten::__and__.Tensor", "aten::_softmax"}) {
    INFO(op);
    CHECK_FALSE(op_properties(op).in_place);
    CHECK(op_properties(op).is_pure());
  }
}

TEST_CASE("out overloads are recognized by name and by table") {
  for (const char* op :
       {"aten::add.out", "aten::sum.IntList_out", "aten::div.out_mode", "aten::xlogy.OutTensor",
        "aten::gelu_backward.grad_input", "aten::nll_loss_forward.output", "aten::max.dim_max",
        "aten::sort.values", "aten::topk.values"}) {
    INFO(op);
    OpProperties p = op_properties(op);
    CHECK(p.out_variant);
    CHECK(p.mutates);
    CHECK_FALSE(p.in_place);
  }
  CHECK_FALSE(op_properties("aten::max.dim").out_variant);
  CHECK_FALSE(op_properties("aten::sort.stable").out_variant);
}

TEST_CASE("random operators are never pure") {
  for (const char* op :
       {"aten::dropout", "aten::native_dropout", "aten::bernoulli.p", "aten::bernoulli_.float",
        "aten::rand", "aten::randn_like", "aten::randint.low", "aten::normal.Tensor_float",
        "aten::uniform_", "aten::randperm", "aten::multinomial", "aten::rrelu_with_noise"}) {
    INFO(op);
    OpProperties p = op_properties(op);
    CHECK(p.random);
    CHECK(p.has_side_effects());
    CHECK_FALSE(p.is_pure());
  }
  CHECK_FALSE(op_properties("aten::randomize_me").random);
  CHECK_FALSE(op_properties("aten::range").random);
}

TEST_CASE("mutating and effectful operators the names do not reveal come from the table") {
  CHECK(op_properties("aten::native_batch_norm").mutates);
  CHECK(op_properties("aten::_native_batch_norm_legit").mutates);
  CHECK_FALSE(op_properties("aten::_native_batch_norm_legit_functional").mutates);
  CHECK(op_properties("aten::_assert_async.msg").effectful);
  CHECK(op_properties("aten::_assert_async.msg").has_side_effects());
  CHECK_FALSE(op_properties("aten::_assert_async.msg").mutates);
}

TEST_CASE("views always alias, reshape-like operators may") {
  for (const char* op : {"aten::view",          "aten::t",
                         "aten::transpose.int", "aten::permute",
                         "aten::expand",        "aten::slice.Tensor",
                         "aten::select.int",    "aten::unsqueeze",
                         "aten::squeeze.dim",   "aten::as_strided",
                         "aten::alias",         "aten::detach",
                         "aten::_unsafe_view",  "aten::unbind.int",
                         "aten::split.Tensor",  "aten::split_with_sizes",
                         "aten::chunk",         "aten::narrow",
                         "aten::diagonal",      "aten::unfold",
                         "aten::view_as",       "aten::expand_as",
                         "aten::numpy_T"}) {
    INFO(op);
    OpProperties p = op_properties(op);
    CHECK(p.is_view());
    CHECK(p.is_pure());
  }
  for (const char* op :
       {"aten::reshape", "aten::flatten.using_ints", "aten::contiguous", "aten::to.dtype"}) {
    INFO(op);
    OpProperties p = op_properties(op);
    CHECK(p.alias == AliasKind::MayAlias);
    CHECK_FALSE(p.is_view());
    CHECK(p.may_alias_input());
  }
  CHECK(op_properties("aten::clone").alias == AliasKind::None);
  CHECK(op_properties("aten::view_copy").alias == AliasKind::None);
}

TEST_CASE("operators outside aten and prims are opaque") {
  OpProperties p = op_properties("mylib::custom");
  CHECK_FALSE(p.known_namespace);
  CHECK(p.mutates);
  CHECK(p.has_side_effects());
  CHECK_FALSE(p.is_pure());
  CHECK(p.may_alias_input());
  CHECK(op_properties("prims::convert_element_type").is_pure());
  CHECK_FALSE(op_properties("not an op").is_pure());
}

TEST_CASE("a recorded autograd.Function writes nothing, other opaque operators may") {
  auto graph = parse_graph(R"(graph(%x: f32[4] cpu):
  %a: f32[4] cpu = dynvm_fn::apply_0([%x])
  %b: f32[4] cpu = mylib::op(%x)
  return (%a, %b)
)");
  REQUIRE(graph);
  std::vector<const Node*> nodes(graph->nodes().begin(), graph->nodes().end());
  REQUIRE(nodes.size() == 2);
  CHECK_FALSE(node_may_write(*nodes[0]));
  CHECK(node_may_write(*nodes[1]));
  // Still opaque otherwise: it may alias, and nothing is assumed of its purity.
  CHECK(op_properties("dynvm_fn::apply_0").may_alias_input());
  CHECK_FALSE(op_properties("dynvm_fn::apply_0").is_pure());
}
