// Graphs with dynamic shapes: symbols and relations in the text form both ways, what the
// verifier reports about symbolic sizes, and specialize_shapes.
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/graph/graph_parser.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/specialize_shapes.h"
#include "dynvm/graph/verify.h"

using dynvm::graph::Graph;
using dynvm::graph::parse_graph;
using dynvm::graph::parse_sym_relation;
using dynvm::graph::specialize_shapes;
using dynvm::graph::SymExpr;
using dynvm::graph::SymRelation;
using dynvm::graph::to_text;

namespace {

// A block's attention-score shape over a batch s0 and a sequence s1, with a branch the
// trace took on the sequence length.
const char* const kSymbolic =
    "symbol s0 = 2 from \"L['x'].size()[0]\"\n"
    "symbol s1 = 7 from \"L['x'].size()[1]\"\n"
    "assume s1 > 3\n"
    "graph(%x: f32[s0, s1, 16] cpu):\n"
    "  %0: f32[s0*s1, 16] cpu = aten::view(%x, [sym(s0*s1), 16])\n"
    "  %1: f32[s0, s1 - 1, 16]{16*s1, 16, 1} cpu = aten::slice.Tensor(%x, 1, 1, "
    "9223372036854775807, 1)\n"
    "  %2: f32[2*s1, 16] cpu = aten::cat(%x, sym(2*s1))\n"
    "  return (%0, %1, %2)\n";

Graph parsed(const std::string& text) {
  auto g = parse_graph(text);
  if (!g) FAIL(g.error().message);
  return std::move(*g);
}

std::string first_error(const Graph& g) {
  auto errors = dynvm::graph::verify(g);
  return errors.empty() ? "" : errors.front().message;
}

}  // namespace

TEST_CASE("a symbolic graph prints as it parses") {
  Graph g = parsed(kSymbolic);
  CHECK(to_text(g) == kSymbolic);
  REQUIRE(g.symbols().size() == 2);
  CHECK(g.symbols()[1].source == "L['x'].size()[1]");
  CHECK(g.symbols()[1].hint == 7);
  REQUIRE(g.relations().size() == 1);
  CHECK(g.relations()[0].to_string() == "s1 > 3");
  // The concrete sizes are the expressions at the symbols' hints.
  const auto* meta = g.inputs()[0]->meta();
  CHECK(meta->sizes == std::vector<int64_t>{2, 7, 16});
  CHECK(meta->strides == std::vector<int64_t>{112, 16, 1});
  CHECK(meta->sym_strides[0].to_string() == "16*s1");
  CHECK(first_error(g).empty());
  CHECK(to_text(g.clone()) == kSymbolic);
}

TEST_CASE("the parser refuses undeclared and misnumbered symbols") {
  auto undeclared = parse_graph("graph(%x: f32[s0] cpu):\n  return (%x)\n");
  REQUIRE(!undeclared);
  CHECK(undeclared.error().message.find("s0 is not a declared symbol") != std::string::npos);
  auto misnumbered =
      parse_graph("symbol s1 = 3 from \"L['x'].size()[0]\"\ngraph():\n  return ()\n");
  REQUIRE(!misnumbered);
  CHECK(misnumbered.error().message.find("expected the symbol s0") != std::string::npos);
  auto bad_relation = parse_graph(
      "symbol s0 = 3 from \"L['x'].size()[0]\"\nassume s0 = 3\ngraph():\n  return ()\n");
  REQUIRE(!bad_relation);
}

TEST_CASE("the verifier checks symbolic sizes against the hints") {
  Graph g = parsed(kSymbolic);
  auto meta = *g.inputs()[0]->meta();
  meta.sizes[1] = 8;  // no longer s1 at its hint 7
  g.inputs()[0]->set_type(dynvm::graph::ValueType::tensor(meta));
  CHECK(first_error(g).find("size s1 is not 8") != std::string::npos);
  meta.sizes[1] = 7;
  meta.sym_sizes[1] = SymExpr::symbol(5);
  g.inputs()[0]->set_type(dynvm::graph::ValueType::tensor(meta));
  CHECK(first_error(g).find("s5 is not a symbol of the graph") != std::string::npos);
}

TEST_CASE("specialize_shapes substitutes sizes, strides and symbolic ints") {
  Graph g = parsed(kSymbolic);
  auto fixed = specialize_shapes(g, {3, 5});
  REQUIRE(static_cast<bool>(fixed));
  CHECK(to_text(*fixed) ==
        "graph(%x: f32[3, 5, 16] cpu):\n"
        "  %0: f32[15, 16] cpu = aten::view(%x, [15, 16])\n"
        "  %1: f32[3, 4, 16]{80, 16, 1} cpu = aten::slice.Tensor(%x, 1, 1, "
        "9223372036854775807, 1)\n"
        "  %2: f32[10, 16] cpu = aten::cat(%x, 10)\n"
        "  return (%0, %1, %2)\n");
  CHECK(first_error(*fixed).empty());
  CHECK(!fixed->is_symbolic());
  // The source graph is unchanged.
  CHECK(to_text(g) == kSymbolic);
}

TEST_CASE("specialize_shapes refuses values a relation excludes") {
  Graph g = parsed(kSymbolic);
  auto excluded = specialize_shapes(g, {3, 2});
  REQUIRE(!excluded);
  CHECK(excluded.error().message.find("s1 > 3 does not hold") != std::string::npos);
  auto missing = specialize_shapes(g, {3});
  REQUIRE(!missing);
}

TEST_CASE("relations parse, print and evaluate") {
  for (const char* text :
       {"s0 == s1", "s0 != 1", "2*s0 < s1 + 1", "s0 <= 4", "(s0 // 2) > 3", "s0 >= 2"}) {
    auto r = parse_sym_relation(text);
    REQUIRE(static_cast<bool>(r));
    CHECK(r->to_string() == text);
  }
  SymRelation r = *parse_sym_relation("(s0 // 2) > 3");
  CHECK(r.holds({8}) == true);
  CHECK(r.holds({7}) == false);
  CHECK(!r.holds({}).has_value());
  CHECK(!parse_sym_relation("s0 + 1"));
}
