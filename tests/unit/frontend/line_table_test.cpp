// Location tables: every entry form, malformed tables, and the positions of real code
// against co_positions().
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/location_table.h"
#include "dynvm/frontend/pyc_file.h"
#include "test_support.h"

using namespace dynvm::frontend;
using dynvm::frontend::testing::data_path;
using dynvm::frontend::testing::Json;
using dynvm::frontend::testing::read_json;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}

int entry_start(int code, int length) { return 0x80 | (code << 3) | (length - 1); }

Positions pos(int line, int end_line, int col, int end_col) {
  return Positions{line, end_line, col, end_col};
}

}  // namespace

TEST_CASE("all five entry forms") {
  const std::string table =
      bytes({entry_start(14, 1), 3, 1, 1, 1}) +       // long: line 10-1=9, end 10, cols None
      bytes({entry_start(2, 3), (3 << 4) | 5}) +      // short: code 2 -> col 2*8+3=19, end 24
      bytes({entry_start(11, 1), 4, 9}) +             // one line: line +1, cols 4..9
      bytes({entry_start(13, 2), 5}) +                // no column: line -2
      bytes({entry_start(15, 1)}) +                   // none
      bytes({entry_start(14, 8), 4, 3, 0x41, 2, 7});  // long: +2 lines, end +3, cols 128..6
  auto entries = parse_location_table(table, 10);
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 6);
  const auto& e = *entries;
  CHECK(e[0].form == LocationForm::kLong);
  CHECK(e[0].positions == pos(9, 10, 0, 0));
  CHECK(e[0].start == 0);
  CHECK(e[1].form == LocationForm::kShort);
  CHECK(e[1].positions == pos(9, 9, 19, 24));
  CHECK(e[1].start == 1);
  CHECK(e[1].length == 3);
  CHECK(e[2].form == LocationForm::kOneLine);
  CHECK(e[2].positions == pos(10, 10, 4, 9));
  CHECK(e[2].start == 4);
  CHECK(e[3].form == LocationForm::kNoColumn);
  CHECK(e[3].positions == pos(8, 8, -1, -1));
  CHECK(e[4].form == LocationForm::kNone);
  CHECK(e[4].positions == Positions{});
  CHECK(e[5].form == LocationForm::kLong);
  // The line keeps counting from the last line seen, across "none" entries.
  CHECK(e[5].positions == pos(10, 13, 128, 6));  // 0x41 0x02 is the varint 129
  CHECK(e[5].start == 8);
  CHECK(e[5].length == 8);
}

TEST_CASE("a table CPython 3.11 wrote") {
  // compile("x = 1\n", ...): co_positions() gives these.
  auto entries = parse_location_table(
      bytes({0xf0, 0x03, 0x01, 0x01, 0x01, 0xd8, 0x04, 0x05, 0x80, 0x01, 0x80, 0x01, 0x80, 0x01}),
      1);
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 5);
  CHECK((*entries)[0].positions == pos(0, 1, 0, 0));
  CHECK((*entries)[1].positions == pos(1, 1, 4, 5));
  CHECK((*entries)[2].positions == pos(1, 1, 0, 1));
  CHECK((*entries)[4].positions == pos(1, 1, 0, 1));
}

TEST_CASE("malformed location tables are errors naming the byte") {
  auto error_of = [](const std::string& table) {
    auto r = parse_location_table(table, 1);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(error_of(bytes({0x01})) == "location table: missing entry-start bit at byte 0");
  CHECK(error_of(bytes({entry_start(14, 1), 3, 1, 1})) ==
        "location table: truncated entry at byte 4");
  CHECK(error_of(bytes({entry_start(14, 1), 0x43})) == "location table: truncated entry at byte 2");
  CHECK(error_of(bytes({entry_start(11, 1), 4, entry_start(15, 1)})) ==
        "location table: entry ends early (entry-start bit) at byte 2");
  CHECK(error_of(bytes({entry_start(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 1})) ==
        "location table: varint too large at byte 1");
  // A line pushed past int range.
  CHECK(error_of(bytes({entry_start(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03})) ==
        "location table: line or column out of range at byte 0");
}

TEST_CASE("instructions take the positions co_positions() gives them") {
  for (const char* name : {"calls", "control", "expressions", "big", "bisect"}) {
    INFO(name);
    auto pyc = read_pyc_file(data_path(std::string("decode/py311/") + name + ".pyc"));
    REQUIRE(pyc.ok());
    auto code = decode_recursive(*pyc->code);
    REQUIRE(code.ok());
    const Json expected =
        read_json(data_path(std::string("decode/py311/") + name + ".positions.json"));
    // Code objects depth-first, as the fixture lists them.
    std::vector<const CodeInfo*> all;
    std::vector<const CodeInfo*> stack = {&*code};
    while (!stack.empty()) {
      const CodeInfo* c = stack.back();
      stack.pop_back();
      all.push_back(c);
      for (auto it = c->nested.rbegin(); it != c->nested.rend(); ++it)
        stack.push_back(it->code.get());
    }
    REQUIRE(all.size() == expected.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const Json& want = expected[i];
      INFO(want["qualname"].string);
      REQUIRE(all[i]->instructions.size() == want["positions"].size());
      for (size_t k = 0; k < all[i]->instructions.size(); ++k) {
        const Positions& p = all[i]->instructions[k].positions;
        const Json& w = want["positions"][k];
        auto as_int = [](const Json& j) { return j.is_null() ? -1 : j.as_int(); };
        INFO("offset " << all[i]->instructions[k].offset);
        CHECK(p == pos(as_int(w[0]), as_int(w[1]), as_int(w[2]), as_int(w[3])));
      }
    }
  }
}
