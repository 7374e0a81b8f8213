// The graph text format: exact round-trips of every literal kind, renumbering, and
// parse errors that say where and what was expected, on any input.
#include <cmath>
#include <cstring>
#include <random>

#include "catch.h"
#include "dynvm/graph/graph_parser.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/verify.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::Expected;
using dynvm::graph::test::parse;
using dynvm::graph::test::parse_error;

namespace {

// parse → print → parse → print gives the same text both times, which must equal `text`.
void check_round_trip(const std::string& text) {
  Graph first = parse(text);
  std::string printed = to_text(first);
  CHECK(printed == text);
  Graph second = parse(printed);
  CHECK(to_text(second) == printed);
}

const char* const kModel =
    "graph(%x: f32[2, 3] cpu, %w: f32[4, 3] cpu grad, %b: f32[4] cpu grad):\n"
    "  %0: f32[3, 4]{1, 3} cpu = aten::t(%w)\n"
    "  %1: f32[2, 4] cpu = aten::addmm(%b, %x, %0)\n"
    "  %2: f32[2, 4] cpu = aten::add.Tensor(%1, 1.0, alpha=1)\n"
    "  %3: f32[2] cpu, %4: i64[2] cpu = aten::max.dim(%2, 1, False)\n"
    "  %5: f32[2, 4] cpu = aten::native_dropout(%2, 0.5, True)\n"
    "  aten::_assert_async(%4)\n"
    "  return (%2, %4)\n";

}  // namespace

TEST_CASE("a model-like graph round-trips") { check_round_trip(kModel); }

TEST_CASE("every value and literal kind round-trips") {
  check_round_trip(
      "graph(%x: bf16[] cuda:0, %l: Tensor[], %n: int, %f: float, %flag: bool, %u: Tensor):\n"
      "  %0: c64[0, 5]{7, -1} meta grad = aten::empty.memory_format([0, 5], "
      "dtype=torch.complex64, layout=torch.strided, device=meta, pin_memory=None, "
      "memory_format=torch.channels_last)\n"
      "  %1: Tensor[], %2: int, %3: float, %4: bool, %5: Tensor = aten::many(%l, %n, %f, %flag, "
      "%u, cuda, cuda:7, torch.preserve_format, torch.sparse_csr, torch.bool, torch._mkldnn)\n"
      "  %6: u8[1] cpu, %7: i8[1] cpu, %8: i16[1] cpu, %9: i32[1] cpu, %10: f16[1] cpu, "
      "%11: f64[1] cpu, %12: c128[1] cpu, %13: bool[2] cpu = aten::dtypes()\n"
      "  return (%0, %1, %13)\n");
}

TEST_CASE("doubles round-trip exactly, including inf, nan and negative zero") {
  check_round_trip(
      "graph():\n"
      "  aten::doubles(0.1, -0.0, 0.0, 1.0, -2.5, 1e+20, 1e-07, 5e-324, "
      "1.7976931348623157e+308, -1.7976931348623157e+308, 2.2250738585072014e-308, "
      "0.30000000000000004, 123456789012345.6, inf, -inf, nan)\n"
      "  return ()\n");
  // Bit-exact, not just text-identical.
  for (double d : {0.1, 1.0 / 3.0, -0.0, 5e-324, 6.02214076e23, -1e-300}) {
    Graph g = parse("graph():\n  aten::d(" + format_double(d) + ")\n  return ()\n");
    double back = g.first_node()->arg(0).as_double();
    CHECK(std::memcmp(&back, &d, sizeof d) == 0);
  }
  Graph g = parse("graph():\n  aten::d(nan, inf, -inf)\n  return ()\n");
  CHECK(std::isnan(g.first_node()->arg(0).as_double()));
  CHECK(g.first_node()->arg(2).as_double() < 0);
  CHECK(format_double(3.0) == "3.0");
  CHECK(format_double(-0.0) == "-0.0");
}

TEST_CASE("integers round-trip at the edges of int64") {
  check_round_trip(
      "graph():\n"
      "  aten::ints(0, -1, 9223372036854775807, -9223372036854775808, [], [-3, 4])\n"
      "  return ()\n");
  Graph g = parse("graph():\n  aten::i(-9223372036854775808)\n  return ()\n");
  CHECK(g.first_node()->arg(0).as_int() == INT64_MIN);
}

TEST_CASE("strings escape quotes, backslashes, control and non-ASCII bytes") {
  check_round_trip(
      "graph():\n"
      "  aten::div.Tensor_mode(1, 2, rounding_mode=\"floor\")\n"
      "  aten::strings(\"\", \"a\\\"b\\\\c\\nd\\te\\rf\\x01\\x7f\\xc3\\xa9 # not a comment\")\n"
      "  return ()\n");
  Graph g = parse("graph():\n  aten::s(\"\\x41\\xC3\\xa9\", \"caf\xc3\xa9\")\n  return ()\n");
  CHECK(g.first_node()->arg(0).as_string() == "A\xc3\xa9");
  CHECK(g.first_node()->arg(1).as_string() == "caf\xc3\xa9");
  CHECK(to_text(*g.first_node(), ValueNames(g)) == "aten::s(\"A\\xc3\\xa9\", \"caf\\xc3\\xa9\")");
  CHECK(quote_string(std::string("\0", 1)) == "\"\\x00\"");
}

TEST_CASE("nested lists of values, None and literals round-trip") {
  check_round_trip(
      "graph(%x: f32[4] cpu, %i: i64[2] cpu):\n"
      "  %0: f32[2] cpu = aten::index.Tensor(%x, [%i, None])\n"
      "  aten::nested([[1, 2], [], [None, %x, [1.5, True, \"s\"]], [[[]]]], None, [None])\n"
      "  return (%0)\n");
}

TEST_CASE("the printer renumbers named values in program order") {
  Graph g = parse(
      "# comments and blank lines are fine anywhere\n"
      "graph(%input_0: f32[2] cpu,\n"
      "      %self_conv1_weight: f32[2] cpu):   # trailing comment\n"
      "\n"
      "  %conv1_out: f32[2] cpu = aten::mul.Tensor(%input_0, %self_conv1_weight)\n"
      "  %17: f32[2] cpu, %a: i64[] cpu = aten::max.dim(%conv1_out, 0)\n"
      "  %relu: f32[2] cpu = aten::relu(%conv1_out)\n"
      "  return (%relu, %a)\n");
  CHECK(to_text(g) ==
        "graph(%input_0: f32[2] cpu, %self_conv1_weight: f32[2] cpu):\n"
        "  %0: f32[2] cpu = aten::mul.Tensor(%input_0, %self_conv1_weight)\n"
        "  %1: f32[2] cpu, %2: i64[] cpu = aten::max.dim(%0, 0)\n"
        "  %3: f32[2] cpu = aten::relu(%0)\n"
        "  return (%3, %2)\n");
  CHECK(g.inputs()[1]->name() == "self_conv1_weight");
}

TEST_CASE("whitespace and line breaks are free-form") {
  Graph g = parse("graph(%x:f32[2]cpu):%0:f32[2]cpu=aten::relu(%x)return(%0)");
  CHECK(to_text(g) ==
        "graph(%x: f32[2] cpu):\n"
        "  %0: f32[2] cpu = aten::relu(%x)\n"
        "  return (%0)\n");
}

TEST_CASE("the parser names line, column and what it expected") {
  CHECK(parse_error("") == "1:1: expected 'graph', found end of input");
  CHECK(parse_error("graph(%x: f32[2] cpu):\n  %0: f32[2] cpu = aten::relu(%y)\n  return (%0)\n") ==
        "2:31: use of undefined value %y");
  CHECK(parse_error("graph(%x: f32[2] cpu):\n  %0: f32[2] cpu = aten::relu(%x\n") ==
        "3:1: expected ',' or ')' after an argument of aten::relu, found end of input");
  CHECK(parse_error("graph(%x: f32[2] cpu):\n  return (%x)\n  %0: f32[2] cpu = aten::relu(%x)\n") ==
        "3:3: expected end of input after 'return', found '%0'");
  CHECK(parse_error("graph(%x: f32[2] cpu, %x: f32[2] cpu):\n  return ()\n") ==
        "1:23: %x is already defined at 1:7");
  CHECK(parse_error("graph(%0: f32[2] cpu):\n  return ()\n") ==
        "1:7: graph input names must start with a letter or '_': %0");
  CHECK(parse_error("graph():\n  %0: f33[2] cpu = aten::x()\n  return ()\n") ==
        "2:7: unknown type 'f33'");
  CHECK(parse_error("graph():\n  %0: f32[2] gpu = aten::x()\n  return ()\n") ==
        "2:14: expected a device (cpu, cuda:0, meta) after the tensor sizes, found 'gpu'");
  CHECK(parse_error("graph():\n  %0: f32[2, 3]{1} cpu = aten::x()\n  return ()\n") ==
        "2:17: expected 2 strides (one per size), found 1");
  CHECK(parse_error("graph():\n  %0: f32[-2] cpu = aten::x()\n  return ()\n") ==
        "2:11: sizes must not be negative");
  CHECK(parse_error("graph():\n  relu(1)\n  return ()\n") ==
        "2:7: expected '::' after the operator namespace 'relu', found '('");
  CHECK(parse_error("graph():\n  aten::x(alpha=1, 2)\n  return ()\n") ==
        "2:20: positional argument after keyword arguments of aten::x");
  CHECK(parse_error("graph():\n  aten::x(a=1, a=2)\n  return ()\n") ==
        "2:16: keyword argument 'a' given twice to aten::x");
  CHECK(parse_error("graph():\n  aten::x(99999999999999999999)\n  return ()\n") ==
        "2:11: integer literal out of range");
  CHECK(parse_error("graph():\n  aten::x(1e999)\n  return ()\n") ==
        "2:11: floating-point literal out of range");
  CHECK(parse_error("graph():\n  aten::x(12abc)\n  return ()\n") == "2:11: malformed number '12a'");
  CHECK(parse_error("graph():\n  aten::x(\"abc)\n  return ()\n") == "2:11: unterminated string");
  CHECK(parse_error("graph():\n  aten::x(\"\\q\")\n  return ()\n") ==
        "2:12: unknown escape '\\q' in a string");
  CHECK(parse_error("graph():\n  aten::x(torch.float33)\n  return ()\n") ==
        "2:17: unknown constant 'torch.float33' (expected a dtype, memory format or layout)");
  CHECK(parse_error("graph():\n  aten::x(Nope)\n  return ()\n") ==
        "2:11: expected an argument (%value, number, string, list, None, True, False, "
        "torch.<constant>, device), found 'Nope'");
  CHECK(parse_error("graph():\n  aten::x(cuda:x)\n  return ()\n") ==
        "2:16: expected a device index, found 'x'");
  CHECK(parse_error("graph():\n  %0: f32[2] cpu, %0: f32[2] cpu = aten::x()\n  return ()\n") ==
        "2:19: %0 is already defined at 2:3");
  CHECK(parse_error("graph():\n  aten::x(\x01)\n  return ()\n") ==
        "2:11: expected an argument (%value, number, string, list, None, True, False, "
        "torch.<constant>, device), found byte 0x01");
}

TEST_CASE("deeply nested lists are refused, not recursed into") {
  std::string deep = "graph():\n  aten::x(" + std::string(100000, '[') + ")\n  return ()\n";
  CHECK(parse_error(deep) == "2:43: lists nested deeper than 32 levels");
  std::string ok =
      "graph():\n  aten::x(" + std::string(32, '[') + std::string(32, ']') + ")\n  return ()\n";
  check_round_trip(ok);
}

TEST_CASE("truncated and garbled text never crashes the parser") {
  // Every prefix of valid text, and random byte edits of it, either parse or fail
  // with a located message; whatever parses prints and re-parses identically.
  const std::string valid = kModel;
  std::vector<std::string> inputs;
  for (size_t n = 0; n < valid.size(); ++n) inputs.push_back(valid.substr(0, n));
  std::mt19937 rng(1234);  // fixed seed: the same inputs on every run
  const std::string alphabet = "%:[](){},=.-\"\\#\n 0123456789aefinx_";
  for (int i = 0; i < 3000; ++i) {
    std::string text = valid;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        case 2:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          text[at] = static_cast<char>(rng() % 256);
      }
      if (text.empty()) text = "g";
    }
    inputs.push_back(text);
  }
  size_t parsed = 0;
  for (const std::string& text : inputs) {
    Expected<Graph> g = parse_graph(text);
    if (!g) {
      INFO(text);
      CHECK(g.error().message.find(':') != std::string::npos);
      CHECK(g.error().message.find("internal error") == std::string::npos);
      continue;
    }
    ++parsed;
    std::string printed = to_text(*g);
    Expected<Graph> again = parse_graph(printed);
    INFO(text);
    REQUIRE(again.ok());
    CHECK(to_text(*again) == printed);
  }
  // Some edits (inside comments, whitespace, numbers) keep the text valid.
  CHECK(parsed > 0);
}
