// Exception tables: the varint format as dis._parse_exception_table reads it, malformed
// tables, and the checks decode() adds against the code.
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/exception_table.h"
#include "test_support.h"

using namespace dynvm::frontend;
using dynvm::frontend::testing::CodeBuilder;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

// CPython's encoding: big-endian 6-bit groups, 0x40 = more follows, 0x80 on an entry's
// first byte.
void put_varint(std::string& out, uint32_t value, bool entry_start) {
  std::vector<uint8_t> groups;
  do {
    groups.push_back(value & 63);
    value >>= 6;
  } while (value);
  for (size_t i = groups.size(); i-- > 0;) {
    uint8_t b = groups[i];
    if (i) b |= 0x40;
    if (entry_start && i == groups.size() - 1) b |= 0x80;
    out += static_cast<char>(b);
  }
}

std::string encode(const std::vector<ExceptionTableEntry>& entries) {
  std::string out;
  for (const auto& e : entries) {
    put_varint(out, e.start / 2, true);
    put_varint(out, (e.end - e.start) / 2, false);
    put_varint(out, e.target / 2, false);
    put_varint(out, e.depth << 1 | (e.lasti ? 1 : 0), false);
  }
  return out;
}

ExceptionTableEntry entry(uint32_t start, uint32_t end, uint32_t target, uint32_t depth,
                          bool lasti) {
  ExceptionTableEntry e;
  e.start = start;
  e.end = end;
  e.target = target;
  e.depth = depth;
  e.lasti = lasti;
  return e;
}

}  // namespace

TEST_CASE("a table CPython 3.11 wrote parses as dis parses it") {
  // try/except/finally in a function; dis._parse_exception_table gives these entries.
  auto entries =
      parse_exception_table(from_hex("82041600960a3303a0013600b2013303b3033600b611410703"));
  REQUIRE(entries.ok());
  const std::vector<ExceptionTableEntry> expected = {
      entry(4, 12, 44, 0, false),    entry(44, 64, 102, 1, true),    entry(64, 66, 108, 0, false),
      entry(100, 102, 102, 1, true), entry(102, 108, 108, 0, false), entry(108, 142, 142, 1, true)};
  CHECK(*entries == expected);
}

TEST_CASE("multi-byte varints round-trip") {
  const std::vector<ExceptionTableEntry> expected = {entry(0, 2, 2, 0, false),
                                                     entry(126, 130, 8000, 63, true),
                                                     entry(200000, 400000, 600000, 4095, false)};
  auto entries = parse_exception_table(encode(expected));
  REQUIRE(entries.ok());
  CHECK(*entries == expected);
  CHECK(parse_exception_table("").ok());
  CHECK(parse_exception_table("")->empty());
}

TEST_CASE("malformed exception tables are errors naming the byte") {
  std::string good = encode({entry(4, 12, 44, 0, false), entry(44, 64, 102, 1, true)});
  SECTION("truncated entry") {
    auto r = parse_exception_table(good.substr(0, good.size() - 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "exception table: truncated entry at byte 7");
  }
  SECTION("truncated varint") {
    std::string bad = good;
    bad.back() = static_cast<char>(bad.back() | 0x40);  // "more follows" at the end
    auto r = parse_exception_table(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("truncated") != std::string::npos);
  }
  SECTION("missing entry-start bit") {
    std::string bad = good;
    bad[4] = static_cast<char>(bad[4] & 0x7f);
    auto r = parse_exception_table(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "exception table: missing entry-start bit at byte 4");
  }
  SECTION("entry-start bit inside an entry") {
    std::string bad = good;
    bad[1] = static_cast<char>(bad[1] | 0x80);
    auto r = parse_exception_table(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "exception table: unexpected entry-start bit at byte 1");
  }
  SECTION("varint too large") {
    std::string bad = "\xff";
    for (int i = 0; i < 10; ++i) bad += '\x7f';
    auto r = parse_exception_table(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("too large") != std::string::npos);
  }
}

TEST_CASE("decode checks the table against the code") {
  CodeBuilder b({3, 11});
  b.none_constant();
  b.op("RESUME", 0);       // 0
  b.op("NOP");             // 2
  b.op("LOAD_GLOBAL", 0);  // 4..15 (5 caches)
  b.op("LOAD_CONST", 0);   // 16
  b.op("RETURN_VALUE");    // 18
  b.op("PUSH_EXC_INFO");   // 20
  b.op("RERAISE", 0);      // 22
  b.name("x");
  SECTION("a good table resolves handlers to instructions") {
    b.raw().exceptiontable = encode({entry(2, 20, 20, 0, false), entry(20, 24, 22, 1, true)});
    auto code = decode(b.build());
    REQUIRE(code.ok());
    REQUIRE(code->exception_table.size() == 2);
    CHECK(code->exception_table[0].target_index == 5);
    CHECK(code->exception_table[1].target_index == 6);
    CHECK(code->handler_at(4) == &code->exception_table[0]);
    CHECK(code->handler_at(22) == &code->exception_table[1]);
    CHECK(code->handler_at(0) == nullptr);
  }
  SECTION("handler inside inline caches") {
    b.raw().exceptiontable = encode({entry(2, 4, 6, 0, false)});
    auto code = decode(b.build());
    REQUIRE_FALSE(code.ok());
    CHECK(code.error().message.find("handler is not the start of an instruction") !=
          std::string::npos);
  }
  SECTION("range past the code") {
    b.raw().exceptiontable = encode({entry(2, 40, 20, 0, false)});
    auto code = decode(b.build());
    REQUIRE_FALSE(code.ok());
    CHECK(code.error().message.find("outside the code") != std::string::npos);
  }
  SECTION("range ending inside caches") {
    b.raw().exceptiontable = encode({entry(2, 8, 20, 0, false)});
    auto code = decode(b.build());
    REQUIRE_FALSE(code.ok());
    CHECK(code.error().message.find("instruction boundaries") != std::string::npos);
  }
  SECTION("bad varints surface with the code object's name") {
    b.raw().exceptiontable = "\x01";
    auto code = decode(b.build());
    REQUIRE_FALSE(code.ok());
    CHECK(code.error().message ==
          "code object 'f' (test.py): exception table: missing entry-start bit at byte 0");
  }
}
