// The dis-shaped listings against CPython's own dis: JSON for 3.11, 3.12 and 3.13
// fixtures, the text of dis.dis() for 3.11 and 3.13, and dis's argument descriptions case
// by case.
#include <regex>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/pyc_file.h"
#include "test_support.h"

using namespace dynvm::frontend;
using dynvm::frontend::testing::CodeBuilder;
using dynvm::frontend::testing::data_path;
using dynvm::frontend::testing::Json;
using dynvm::frontend::testing::parse_json;
using dynvm::frontend::testing::read_file;
using dynvm::frontend::testing::read_json;

namespace {

CodeInfo decode_pyc(const std::string& path) {
  auto pyc = read_pyc_file(path);
  if (!pyc.ok()) FAIL(pyc.error().message);
  auto code = decode_recursive(*pyc->code);
  if (!code.ok()) FAIL(code.error().message);
  return std::move(*code);
}

// Code-object reprs carry a memory address in CPython and 0x0 in dynvm.
void normalise_addresses(Json& listing) {
  static const std::regex address(" at 0x[0-9a-f]+,");
  for (auto& code : listing.items) {
    for (auto& ins : code.members["instructions"].items) {
      auto& argval = ins.members["argval"].string;
      if (argval.find("<code object") != std::string::npos) {
        argval = std::regex_replace(argval, address, " at 0x0,");
      }
    }
  }
}

void check_json_matches(const CodeInfo& code, const std::string& expected_path) {
  Json ours = parse_json(format_dis_json(code));
  Json theirs = read_json(expected_path);
  normalise_addresses(theirs);
  REQUIRE(ours.size() == theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const Json& a = ours[i];
    const Json& b = theirs[i];
    INFO(b["qualname"].string << " (line " << b["firstlineno"].as_int() << ")");
    CHECK(a["qualname"] == b["qualname"]);
    CHECK(a["firstlineno"] == b["firstlineno"]);
    CHECK(a["exception_table"] == b["exception_table"]);
    REQUIRE(a["instructions"].size() == b["instructions"].size());
    for (size_t k = 0; k < a["instructions"].size(); ++k) {
      if (a["instructions"][k] != b["instructions"][k]) {
        FAIL_CHECK("ours:    " << a["instructions"][k].dump()
                               << "\nCPython: " << b["instructions"][k].dump());
        break;
      }
    }
  }
}

void check_text_matches(const CodeInfo& code, const std::string& expected_path) {
  const std::string expected = read_file(expected_path);
  const std::string ours = format_dis_text(code);
  if (ours != expected) {
    // Report the first line that differs.
    size_t at = 0;
    while (at < ours.size() && at < expected.size() && ours[at] == expected[at]) ++at;
    size_t line_start = expected.rfind('\n', at == 0 ? 0 : at - 1);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    FAIL("first difference at:\n  ours:    "
         << ours.substr(line_start, ours.find('\n', at) - line_start)
         << "\n  CPython: " << expected.substr(line_start, expected.find('\n', at) - line_start));
  }
}

// The modules tests/data/dis_fixtures/generate.py lists uncompressed for 3.13.
constexpr const char* kListed313[] = {"bisect", "fnmatch", "json.decoder", "contextlib"};

}  // namespace

TEST_CASE("JSON listings match CPython 3.11's dis") {
  for (const char* name : {"calls", "control", "expressions", "big", "bisect"}) {
    INFO(name);
    CodeInfo code = decode_pyc(data_path(std::string("decode/py311/") + name + ".pyc"));
    check_json_matches(code, data_path(std::string("decode/py311/") + name + ".dis.json"));
  }
}

TEST_CASE("JSON listings match CPython 3.12's dis") {
  for (const char* name : {"bisect", "fnmatch", "json.decoder", "contextlib"}) {
    INFO(name);
    CodeInfo code = decode_pyc(data_path(std::string("py312/pyc/") + name + ".pyc"));
    check_json_matches(code, data_path(std::string("decode/py312/") + name + ".dis.json"));
  }
}

TEST_CASE("JSON listings match CPython 3.13's dis") {
  for (const char* name : kListed313) {
    INFO(name);
    CodeInfo code = decode_pyc(data_path(std::string("py313/pyc/") + name + ".pyc"));
    CHECK(code.version == PythonVersion{3, 13});
    check_json_matches(code, data_path(std::string("py313/listing/") + name + ".dis.json"));
  }
}

TEST_CASE("text listings match dis.dis() of CPython 3.13") {
  for (const char* name : kListed313) {
    INFO(name);
    CodeInfo code = decode_pyc(data_path(std::string("py313/pyc/") + name + ".pyc"));
    check_text_matches(code, data_path(std::string("py313/listing/") + name + ".dis.txt"));
  }
}

TEST_CASE("text listings match dis.dis() of CPython 3.11") {
  for (const char* name : {"calls", "control", "expressions", "big", "bisect"}) {
    INFO(name);
    CodeInfo code = decode_pyc(data_path(std::string("decode/py311/") + name + ".pyc"));
    check_text_matches(code, data_path(std::string("decode/py311/") + name + ".dis.txt"));
  }
}

TEST_CASE("argument descriptions as dis writes them") {
  SECTION("FORMAT_VALUE, MAKE_FUNCTION, KW_NAMES by version") {
    for (PythonVersion v : {PythonVersion{3, 11}, PythonVersion{3, 12}}) {
      CodeBuilder b(v);
      b.none_constant();
      b.op("FORMAT_VALUE", 0);
      b.op("FORMAT_VALUE", 2);
      b.op("FORMAT_VALUE", 4);
      b.op("FORMAT_VALUE", 7);
      b.op("MAKE_FUNCTION", 0);
      b.op("MAKE_FUNCTION", 0xf);
      b.op("KW_NAMES", 0);
      b.op("RAISE_VARARGS", 1);
      b.op("BINARY_OP", 13);
      auto code = decode(b.build());
      REQUIRE(code.ok());
      const auto& ins = code->instructions;
      CHECK(dis_argrepr(*code, ins[0]) == "");
      CHECK(dis_argrepr(*code, ins[1]) == "repr");
      CHECK(dis_argrepr(*code, ins[2]) == "with format");
      CHECK(dis_argrepr(*code, ins[3]) == "ascii, with format");
      CHECK(dis_argrepr(*code, ins[4]) == "");
      CHECK(dis_argrepr(*code, ins[5]) == "defaults, kwdefaults, annotations, closure");
      // 3.11's dis shows no constant for KW_NAMES; 3.12's does.
      CHECK(dis_argrepr(*code, ins[6]) == (v.minor == 11 ? "" : "None"));
      CHECK(dis_argrepr(*code, ins[7]) == "");
      CHECK(dis_argrepr(*code, ins[8]) == "+=");
    }
  }
  SECTION("3.13: conversions, function attributes, local pairs, coerced comparisons") {
    CodeBuilder b({3, 13});
    b.name("g").name("m").local("a").local("b");
    b.op("CONVERT_VALUE", 0);
    b.op("CONVERT_VALUE", 1);
    b.op("CONVERT_VALUE", 3);
    b.op("SET_FUNCTION_ATTRIBUTE", 4);
    b.op("LOAD_FAST_LOAD_FAST", 0x10);
    b.op("STORE_FAST_LOAD_FAST", 0x01);
    b.op("COMPARE_OP", 5 << 5 | 16 | 15);  // the low bits are a specialisation mask
    b.op("COMPARE_OP", 3 << 5 | 15);
    b.op("LOAD_GLOBAL", 0 << 1 | 1);
    b.op("LOAD_GLOBAL", 0 << 1);
    b.op("LOAD_SUPER_ATTR", 1 << 2 | 3);
    b.op("CALL_INTRINSIC_2", 5);
    b.op("CALL_KW", 3);
    auto code = decode_recursive(b.build());
    REQUIRE(code.ok());
    std::vector<std::string> reprs;
    for (const auto& ins : code->instructions) reprs.push_back(dis_argrepr(*code, ins));
    CHECK(reprs == std::vector<std::string>{"", "str", "ascii", "annotations", "b, a", "a, b",
                                            "bool(>=)", "!=", "g + NULL", "g", "m + NULL|self",
                                            "INTRINSIC_SET_TYPEPARAM_DEFAULT", ""});
  }
  SECTION("an empty name gets no NULL prefix") {
    CodeBuilder b({3, 11});
    b.name("");
    b.op("LOAD_GLOBAL", 1);
    auto code = decode(b.build());
    REQUIRE(code.ok());
    CHECK(dis_argrepr(*code, code->instructions[0]) == "");
  }
}

TEST_CASE("listing shapes: jump markers, exception table, JSON escapes") {
  CodeBuilder b({3, 11});
  b.str_constant("a \"quoted\"\nline");
  b.raw().qualname = "f.<locals>.g";
  b.op("NOP");                                                  // 0
  b.op("JUMP_FORWARD", 1);                                      // 2 -> 6
  b.op("NOP");                                                  // 4
  b.op("LOAD_CONST", 0);                                        // 6
  b.op("RETURN_VALUE");                                         // 8
  b.raw().exceptiontable = std::string("\x80\x02\x04\x03", 4);  // 0 to 4 -> 8 [1] lasti
  auto code = decode(b.build());
  REQUIRE(code.ok());
  const std::string text = format_dis_text(*code);
  CHECK(text ==
        "          0 NOP\n"
        "          2 JUMP_FORWARD             1 (to 6)\n"
        "          4 NOP\n"
        "    >>    6 LOAD_CONST               0 ('a \"quoted\"\\nline')\n"
        "    >>    8 RETURN_VALUE\n"
        "ExceptionTable:\n"
        "  0 to 2 -> 8 [1] lasti\n");
  Json json = parse_json(format_dis_json(*code));
  REQUIRE(json.size() == 1);
  CHECK(json[0]["qualname"].string == "f.<locals>.g");
  CHECK(json[0]["instructions"][3]["argval"].string == "'a \"quoted\"\\nline'");
  CHECK(json[0]["instructions"][0]["arg"].is_null());
  CHECK(json[0]["instructions"][0]["line"].is_null());
  CHECK(json[0]["exception_table"][0]["lasti"].boolean);
  CHECK(json[0]["exception_table"][0]["end"].as_int() == 4);
}

TEST_CASE("3.13 listing shapes: labels, lines without a number, label-named exception table") {
  CodeBuilder b({3, 13});
  b.str_constant("a \"quoted\"\nline");
  b.raw().qualname = "f.<locals>.g";
  b.op("NOP");                                                  // 0
  b.op("JUMP_FORWARD", 1);                                      // 2 -> 6
  b.op("NOP");                                                  // 4
  b.op("LOAD_CONST", 0);                                        // 6
  b.op("RETURN_VALUE");                                         // 8
  b.raw().exceptiontable = std::string("\x80\x02\x04\x03", 4);  // 0 to 4 -> 8 [1] lasti
  SECTION("no line numbers") {
    auto code = decode_recursive(b.build());
    REQUIRE(code.ok());
    // dis.dis() labels the exception table's offsets too; get_instructions only the jumps'.
    CHECK(format_dis_text(*code) ==
          "  L1:     NOP\n"
          "          JUMP_FORWARD             1 (to L3)\n"
          "  L2:     NOP\n"
          "  L3:     LOAD_CONST               0 ('a \"quoted\"\\nline')\n"
          "  L4:     RETURN_VALUE\n"
          "ExceptionTable:\n"
          "  L1 to L2 -> L4 [1] lasti\n");
    Json json = parse_json(format_dis_json(*code));
    CHECK(json[0]["instructions"][1]["argval"].string == "to L1");
  }
  SECTION("a stretch without a line, a handler range up to the end") {
    // Lines 1, none, 1000 (code 13: line delta only; code 15: no location).
    b.raw().linetable = std::string("\xe9\x00\xf8\xe9\x4e\x1f", 6);
    b.raw().exceptiontable = std::string("\x83\x02\x04\x02", 4);  // 6 to 10 -> 8 [1]
    auto code = decode_recursive(b.build());
    REQUIRE(code.ok());
    CHECK(format_dis_text(*code) ==
          "   1           NOP\n"
          "               JUMP_FORWARD             1 (to L1)\n"
          "\n"
          "  --           NOP\n"
          "\n"
          "1000   L1:     LOAD_CONST               0 ('a \"quoted\"\\nline')\n"
          "       L2:     RETURN_VALUE\n"
          "ExceptionTable:\n"
          "  L1 to L3 -> L2 [1]\n");
  }
}
