// The dis-shaped listings against CPython's own dis: JSON for 3.11 and 3.12 fixtures,
// the text of dis.dis() for 3.11, and dis's argument descriptions case by case.
#include <regex>
#include <string>

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

TEST_CASE("text listings match dis.dis() of CPython 3.11") {
  for (const char* name : {"calls", "control", "expressions", "big", "bisect"}) {
    INFO(name);
    CodeInfo code = decode_pyc(data_path(std::string("decode/py311/") + name + ".pyc"));
    const std::string expected =
        read_file(data_path(std::string("decode/py311/") + name + ".dis.txt"));
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
