// SymExpr: canonical arithmetic, folding of floor division and remainder, evaluation,
// and the text form both ways.
#include "dynvm/graph/sym_expr.h"

#include <string>
#include <utility>
#include <vector>

#include "catch.h"

using dynvm::graph::parse_sym_expr;
using dynvm::graph::SymExpr;

namespace {

SymExpr s(int id) { return SymExpr::symbol(id); }
SymExpr c(int64_t v) { return SymExpr::constant(v); }

SymExpr parsed(const std::string& text) {
  auto e = parse_sym_expr(text);
  REQUIRE(static_cast<bool>(e));
  return *e;
}

}  // namespace

TEST_CASE("like terms combine as expressions are built") {
  CHECK((s(0) + s(0)).to_string() == "2*s0");
  CHECK((s(1) * s(0) + s(0) * s(1)).to_string() == "2*s0*s1");
  CHECK(((s(0) + c(1)) * (s(0) - c(1))).to_string() == "s0**2 - 1");
  CHECK((s(0) - s(0)) == SymExpr());
  CHECK((s(0) - s(0)).constant_value() == 0);
  CHECK((c(3) * s(2) - c(4) + s(1)).to_string() == "s1 + 3*s2 - 4");
  CHECK((-s(0) + c(2)).to_string() == "-s0 + 2");
  CHECK((s(0) * c(0)).to_string() == "0");
  CHECK(!s(0).is_constant());
  CHECK((c(2) * c(21)).constant_value() == 42);
}

TEST_CASE("floor division and remainder by a constant fold what divides") {
  CHECK(SymExpr::floordiv(c(4) * s(0) + c(6), c(2)) == c(2) * s(0) + c(3));
  CHECK(SymExpr::floordiv(c(4) * s(0) + c(5), c(2)) == c(2) * s(0) + c(2));
  CHECK(SymExpr::floordiv(c(4) * s(0) - c(1), c(2)) == c(2) * s(0) - c(1));
  CHECK(SymExpr::mod(c(6) * s(0) + c(7), c(3)) == c(1));
  CHECK(SymExpr::mod(c(6) * s(0) * s(1), c(3)) == SymExpr());
  CHECK(SymExpr::floordiv(s(0), c(1)) == s(0));
  CHECK(SymExpr::mod(s(0), c(1)) == SymExpr());
  // Python's semantics on negative numbers.
  CHECK(SymExpr::floordiv(c(-3), c(2)).constant_value() == -2);
  CHECK(SymExpr::mod(c(-3), c(2)).constant_value() == 1);
  CHECK(SymExpr::mod(c(3), c(-2)).constant_value() == -1);
  // What does not divide stays an atom.
  SymExpr half = SymExpr::floordiv(s(0), c(2));
  CHECK(half.to_string() == "(s0 // 2)");
  CHECK(SymExpr::mod(s(0) + c(1), c(4)).to_string() == "((s0 + 1) % 4)");
  CHECK(SymExpr::floordiv(s(0), s(1)).to_string() == "(s0 // s1)");
  CHECK((half + half).to_string() == "2*(s0 // 2)");
}

TEST_CASE("evaluation binds symbols by number") {
  SymExpr e = parsed("2*s0*s1 + (s0 // 2) - (s1 % 3) + 1");
  CHECK(e.evaluate({7, 5}) == 2 * 7 * 5 + 3 - 2 + 1);
  CHECK(e.evaluate({-7, 5}) == 2 * -7 * 5 + -4 - 2 + 1);
  CHECK(e.symbols() == std::vector<int32_t>{0, 1});
  CHECK(!e.evaluate({7}).has_value());  // s1 unbound
  CHECK(!SymExpr::floordiv(s(0), s(1)).evaluate({3, 0}).has_value());
  CHECK(parsed("s0**3").evaluate({3}) == 27);
}

TEST_CASE("the text form parses back to the same expression") {
  for (const char* text :
       {"0", "7", "-3", "s0", "2*s0*s1 + s0 - 3", "s0**2 - 1", "(s0 // 2)", "((s0 + 1) % 4)",
        "s1 + 2*(s0 // 2)", "((s0 // 2) // 3)", "((2*s0) // s1)", "-s0 + 2", "s3**2*s4"}) {
    SymExpr e = parsed(text);
    CHECK(e.to_string() == std::string(text));
    CHECK(parsed(e.to_string()) == e);
  }
  // Other spellings reach the canonical form.
  CHECK(parsed("s1*s0 + s0*s1").to_string() == "2*s0*s1");
  CHECK(parsed("(s0 + 1)*(s0 - 1)").to_string() == "s0**2 - 1");
  CHECK(parsed("  ( 4*s0+6 ) // 2 ").to_string() == "2*s0 + 3");
  CHECK(parsed("-(s0 - 2)").to_string() == "-s0 + 2");
}

TEST_CASE("malformed size expressions are refused with where and what") {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"", "expected an integer, a symbol (s0, s1, ...) or '(' at column 1"},
           {"s", "expected a symbol number after 's' at column 2"},
           {"1 +", "expected an integer, a symbol (s0, s1, ...) or '(' at column 4"},
           {"(s0", "expected ')' at column 4"},
           {"s0 / 2", "expected an operator or the end at column 4"},
           {"s0**0", "expected an exponent from 1 to 64 at column 6"},
           {"99999999999999999999", "expected an integer that fits in 64 bits at column 1"}}) {
    auto e = parse_sym_expr(text);
    REQUIRE(!e);
    CHECK(e.error().message == "cannot parse the size expression '" + text + "': " + message);
  }
}

TEST_CASE("max and min fold constants, order their operands and round-trip") {
  CHECK(SymExpr::max(c(3), c(5)).constant_value() == 5);
  CHECK(SymExpr::min(c(3), c(5)).constant_value() == 3);
  CHECK(SymExpr::max(s(0), s(0)) == s(0));
  CHECK(SymExpr::max(c(1), SymExpr::floordiv(s(0), c(4))) ==
        SymExpr::max(SymExpr::floordiv(s(0), c(4)), c(1)));
  SymExpr m = SymExpr::max(c(1), SymExpr::floordiv(s(0), c(4)));
  CHECK(m.evaluate({3}) == 1);
  CHECK(m.evaluate({9}) == 2);
  CHECK(parsed(m.to_string()) == m);
  CHECK(parsed("min(s0, 2*s1) + 1").evaluate({5, 2}) == 5);
  CHECK(m.symbols() == std::vector<int32_t>{0});
  CHECK(!parse_sym_expr("max(s0 s1)"));
}
