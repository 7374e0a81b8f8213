// The marshal reader against CPython's own output (fixtures of 3.11, 3.12 and 3.13), against
// hand-written byte strings for every type code, and on malformed input.
#include <cstdint>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/marshal_reader.h"
#include "frontend/raw_code_text.h"

using dynvm::frontend::BigInt;
using dynvm::frontend::Constant;
using dynvm::frontend::ConstantPtr;
using dynvm::frontend::MarshalReadOptions;
using dynvm::frontend::PythonVersion;
using dynvm::frontend::RawCode;
using dynvm::frontend::read_marshal_code;
using dynvm::frontend::read_marshal_object;
using namespace dynvm::frontend::testing;

namespace {

// --- Building marshal data by hand.

std::string i32(int32_t value) {
  const auto bits = static_cast<uint32_t>(value);
  std::string out;
  for (int i = 0; i < 4; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
  return out;
}

std::string u8(unsigned value) { return std::string(1, static_cast<char>(value)); }

std::string short_ascii(const std::string& text) { return "z" + u8(text.size()) + text; }
std::string bytes_object(const std::string& bytes) { return "s" + i32(bytes.size()) + bytes; }
std::string unicode_object(const std::string& utf8) { return "u" + i32(utf8.size()) + utf8; }

std::string small_tuple(const std::vector<std::string>& items) {
  std::string out = ")" + u8(items.size());
  for (const std::string& item : items) out += item;
  return out;
}

// A code object of the 3.11/3.12 layout; each field is already-encoded marshal data.
struct CodeFields {
  int32_t argcount = 0;
  int32_t posonlyargcount = 0;
  int32_t kwonlyargcount = 0;
  int32_t stacksize = 1;
  int32_t flags = 0;
  std::string code = bytes_object(std::string("\x97\x00\x64\x00\x53\x00", 6));
  std::string consts = small_tuple({"N"});
  std::string names = small_tuple({});
  std::string localsplusnames = small_tuple({});
  std::string localspluskinds = bytes_object("");
  std::string filename = short_ascii("f.py");
  std::string name = short_ascii("f");
  std::string qualname = short_ascii("f");
  int32_t firstlineno = 1;
  std::string linetable = bytes_object("");
  std::string exceptiontable = bytes_object("");

  std::string encode(uint8_t type = 'c') const {
    return u8(type) + i32(argcount) + i32(posonlyargcount) + i32(kwonlyargcount) + i32(stacksize) +
           i32(flags) + code + consts + names + localsplusnames + localspluskinds + filename +
           name + qualname + i32(firstlineno) + linetable + exceptiontable;
  }
};

ConstantPtr read_ok(const std::string& data, const MarshalReadOptions& options = {}) {
  auto result = read_marshal_object(data, options);
  INFO((result ? std::string("ok") : result.error().message));
  REQUIRE(result.ok());
  return *result;
}

std::string error_of(const std::string& data, const MarshalReadOptions& options = {}) {
  auto result = read_marshal_object(data, options);
  return result ? "<no error: " + (*result)->repr() + ">" : result.error().message;
}

std::string repr_of(const std::string& data) { return read_ok(data)->repr(); }

void check_fixture(const std::string& version_dir, const std::string& name) {
  INFO(version_dir + "/" + name);
  const std::string data =
      read_binary_file(fixture_path("marshal/" + version_dir + "/" + name + ".marshal"));
  const std::string text =
      read_binary_file(fixture_path("marshal/" + version_dir + "/" + name + ".txt"));
  REQUIRE(!data.empty());
  REQUIRE(!text.empty());
  MarshalReadOptions options;
  options.version = PythonVersion{3, std::stoi(version_dir.substr(3))};  // "py313" -> 3.13
  auto code = read_marshal_code(data, options);
  INFO((code ? std::string("ok") : code.error().message));
  REQUIRE(code.ok());
  CHECK((*code)->version == options.version);
  const std::vector<std::string> expected = split_lines(text);
  const std::vector<std::string> actual = describe_code(**code);
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
    INFO("line " << i + 1);
    CHECK(actual[i] == expected[i]);
  }
  CHECK(actual.size() == expected.size());
}

}  // namespace

TEST_CASE("marshal: CPython 3.11 fixtures read back as CPython sees them") {
  for (const char* name : {"constants", "functions", "stdlib_bisect", "stdlib_fnmatch"}) {
    check_fixture("py311", name);
  }
}

TEST_CASE("marshal: CPython 3.12 fixtures read back as CPython sees them") {
  for (const char* name : {"constants", "functions", "stdlib_bisect", "stdlib_fnmatch"}) {
    check_fixture("py312", name);
  }
}

TEST_CASE("marshal: CPython 3.13 fixtures read back as CPython sees them") {
  for (const char* name : {"constants", "functions", "stdlib_bisect", "stdlib_fnmatch"}) {
    check_fixture("py313", name);
  }
}

TEST_CASE("marshal: singletons") {
  CHECK(read_ok("N")->kind == Constant::Kind::None);
  CHECK(read_ok(".")->kind == Constant::Kind::Ellipsis);
  CHECK(read_ok("S")->kind == Constant::Kind::StopIteration);
  CHECK(read_ok("T")->bool_value);
  CHECK(read_ok("F")->kind == Constant::Kind::Bool);
  CHECK_FALSE(read_ok("F")->bool_value);
  // Singletons never enter the reference table, even with FLAG_REF: 'r' 0 is invalid.
  CHECK(error_of(small_tuple({"\xce", "r" + i32(0)})) ==
        "bad marshal data at offset 3: invalid reference index 0 (0 objects recorded so far)");
}

TEST_CASE("marshal: ints of every encoding") {
  CHECK(repr_of("i" + i32(-5)) == "-5");
  CHECK(repr_of("i" + i32(INT32_MIN)) == "-2147483648");
  CHECK(repr_of("I" + i32(-1) + i32(0x7FFFFFFF)) == "9223372036854775807");
  // 'l': signed digit count, then base-2**15 digits, least significant first.
  CHECK(repr_of("l" + i32(0)) == "0");
  CHECK(repr_of("l" + i32(-1) + std::string("\x01\x00", 2)) == "-1");
  CHECK(repr_of("l" + i32(3) + std::string("\x00\x00\x00\x00\x02\x00", 6)) == "2147483648");
  // 2**63 = 8 * 2**60 does not fit int64; -2**63 does.
  const std::string two_pow_63 = std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00", 10);
  const ConstantPtr positive = read_ok("l" + i32(5) + two_pow_63);
  CHECK_FALSE(positive->int_value.fits_int64);
  CHECK(positive->repr() == "9223372036854775808");
  const ConstantPtr negative = read_ok("l" + i32(-5) + two_pow_63);
  CHECK(negative->int_value.fits_int64);
  CHECK(negative->int_value.small == INT64_MIN);
  // 2**150: eleven digits, the top one 1.
  std::string digits(20, '\0');
  digits += std::string("\x01\x00", 2);
  CHECK(repr_of("l" + i32(-11) + digits) == "-1427247692705959881058285969449495136382746624");
}

TEST_CASE("marshal: floats and complex numbers, binary and text") {
  CHECK(repr_of("g" + std::string("\x00\x00\x00\x00\x00\x00\xf8\x3f", 8)) == "1.5");
  CHECK(repr_of("g" + std::string("\x00\x00\x00\x00\x00\x00\x00\x80", 8)) == "-0.0");
  CHECK(repr_of("f" + u8(4) + "-2.5") == "-2.5");
  CHECK(repr_of("f" + u8(4) + "+inf") == "inf");
  CHECK(repr_of("f" + u8(4) + "-inf") == "-inf");
  CHECK(repr_of("f" + u8(3) + "nan") == "nan");
  CHECK(repr_of("f" + u8(5) + "1e999") == "inf");
  CHECK(repr_of("f" + u8(6) + "1e-999") == "0.0");
  CHECK(repr_of("f" + u8(8) + "0.1e-400") == "0.0");
  CHECK(repr_of("f" + u8(17) + "0.10000000000000001") == "0.1");
  CHECK(repr_of("x" + u8(1) + "1" + u8(2) + "-2") == "(1-2j)");
  CHECK(repr_of("y" + std::string(8, '\0') + std::string("\x00\x00\x00\x00\x00\x00\x00\x40", 8)) ==
        "2j");
  CHECK(error_of("f" + u8(3) + "1.x") ==
        "bad marshal data at offset 1: invalid float text \"1.x\"");
  CHECK(error_of("f" + u8(4) + "0x10") ==
        "bad marshal data at offset 1: invalid float text \"0x10\"");
  CHECK(error_of("f" + u8(0)) == "bad marshal data at offset 1: invalid float text \"\"");
  CHECK(error_of("f" + u8(2) + "--") == "bad marshal data at offset 1: invalid float text \"--\"");
}

TEST_CASE("marshal: strings of every encoding") {
  CHECK(repr_of(unicode_object("\xc3\xa9t\xc3\xa9")) == "'\xc3\xa9t\xc3\xa9'");
  CHECK(repr_of("t" + i32(2) + "hi") == "'hi'");
  CHECK(repr_of("a" + i32(3) + "abc") == "'abc'");
  CHECK(repr_of("A" + i32(1) + "q") == "'q'");
  CHECK(repr_of(short_ascii("xyz")) == "'xyz'");
  CHECK(repr_of("Z" + u8(0)) == "''");
  // An "ASCII" string byte above 0x7F is Latin-1, as CPython reads it.
  CHECK(read_ok("z" + u8(1) + "\xe9")->bytes == "\xc3\xa9");
  // Lone surrogates are valid (marshal writes them with "surrogatepass").
  CHECK(repr_of(unicode_object("\xed\xa0\x80")) == "'\\ud800'");
  CHECK(repr_of(bytes_object(std::string("a\0'", 3))) == "b\"a\\x00'\"");
}

TEST_CASE("marshal: tuples, frozensets and back-references") {
  CHECK(repr_of(small_tuple({})) == "()");
  CHECK(repr_of("(" + i32(2) + "i" + i32(1) + "N") == "(1, None)");
  CHECK(repr_of(">" + i32(2) + "i" + i32(2) + "i" + i32(1)) == "frozenset({2, 1})");
  CHECK(repr_of(">" + i32(0)) == "frozenset()");

  // FLAG_REF registers an object; 'r' returns the same object, not a copy.
  const ConstantPtr shared = read_ok(small_tuple({"\xfa" + u8(3) + "abc", "r" + i32(0)}));
  REQUIRE(shared->items.size() == 2);
  CHECK(shared->items[0] == shared->items[1]);
  CHECK(shared->repr() == "('abc', 'abc')");

  // Small ints and empty tuples and strings are shared without references too.
  const ConstantPtr small = read_ok(small_tuple(
      {"i" + i32(7), "i" + i32(7), ")" + u8(0), "(" + i32(0), "z" + u8(0), "u" + i32(0)}));
  CHECK(small->items[0] == small->items[1]);
  CHECK(small->items[2] == small->items[3]);
  CHECK(small->items[4] == small->items[5]);
  CHECK(small->repr() == "(7, 7, (), (), '', '')");

  // A flagged container takes its slot before its children: here the tuple is 0, the
  // string 1.
  const ConstantPtr nested =
      read_ok(small_tuple({"\xa9" + u8(1) + "\xfa" + u8(1) + "s", "r" + i32(1), "r" + i32(0)}));
  CHECK(nested->repr() == "(('s',), 's', ('s',))");

  // A code object takes its slot first, too; its fields can refer to earlier objects.
  CodeFields fields;
  fields.name = "\xda" + u8(1) + "g";  // slot 1
  fields.qualname = "r" + i32(1);
  const ConstantPtr code = read_ok(fields.encode('c' | 0x80));
  CHECK(code->code->qualname == "g");
  CHECK(code->repr() == "<code object g at 0x0, file \"f.py\", line 1>");
}

TEST_CASE("marshal: code objects keep every field") {
  CodeFields fields;
  fields.argcount = 2;
  fields.posonlyargcount = 1;
  fields.kwonlyargcount = 1;
  fields.stacksize = 7;
  fields.flags = 0x0F;  // OPTIMIZED | NEWLOCALS | VARARGS | VARKEYWORDS
  fields.localsplusnames =
      small_tuple({short_ascii("a"), short_ascii("b"), short_ascii("c"), short_ascii("args"),
                   short_ascii("kw"), short_ascii("cell")});
  fields.localspluskinds = bytes_object(std::string("\x20\x20\x60\x20\x20\x40", 6));
  fields.names = small_tuple({short_ascii("print")});
  fields.firstlineno = 42;
  fields.linetable = bytes_object("LT");
  fields.exceptiontable = bytes_object("ET");
  MarshalReadOptions options;
  options.version = PythonVersion{3, 12};
  auto result = read_marshal_code(fields.encode(), options);
  REQUIRE(result.ok());
  const RawCode& code = **result;
  CHECK(code.version == PythonVersion{3, 12});
  CHECK(code.argcount == 2);
  CHECK(code.posonlyargcount == 1);
  CHECK(code.kwonlyargcount == 1);
  CHECK(code.stacksize == 7);
  CHECK(code.flags == 0x0F);
  CHECK(code.code == std::string("\x97\x00\x64\x00\x53\x00", 6));
  CHECK(code.consts.size() == 1);
  CHECK(code.names == std::vector<std::string>{"print"});
  CHECK(code.localsplusnames.size() == 6);
  CHECK(code.localspluskinds == std::vector<uint8_t>{0x20, 0x20, 0x60, 0x20, 0x20, 0x40});
  CHECK(code.filename == "f.py");
  CHECK(code.name == "f");
  CHECK(code.qualname == "f");
  CHECK(code.firstlineno == 42);
  CHECK(code.linetable == "LT");
  CHECK(code.exceptiontable == "ET");
}

TEST_CASE("marshal: bytes after the object are ignored") { CHECK(repr_of("Ngarbage") == "None"); }

TEST_CASE("marshal: truncated data is an error at every length") {
  const std::string data = read_binary_file(fixture_path("marshal/py311/functions.marshal"));
  REQUIRE(data.size() > 100);
  for (size_t length = 0; length < data.size(); ++length) {
    auto result = read_marshal_object(std::string_view(data).substr(0, length));
    REQUIRE_FALSE(result.ok());
    const std::string& message = result.error().message;
    INFO(length << ": " << message);
    CHECK(message.rfind("bad marshal data at offset ", 0) == 0);
    const bool truncated = message.find("truncated data") != std::string::npos ||
                           message.find("bytes left") != std::string::npos;
    CHECK(truncated);
  }
  CHECK(error_of("") ==
        "bad marshal data at offset 0: truncated data: the type code of an object needs 1 "
        "byte, 0 left");
  CHECK(error_of("i\x01\x02") ==
        "bad marshal data at offset 1: truncated data: an int needs 4 bytes, 2 left");
  CHECK(error_of("s" + i32(10) + "abc") ==
        "bad marshal data at offset 1: bytes object size 10 exceeds the 3 bytes left");
}

TEST_CASE("marshal: unknown and unsupported type codes") {
  CHECK(error_of("i" + i32(0) + "N", {}) == "<no error: 0>");
  CHECK(error_of(small_tuple({"N", "^"})) ==
        "bad marshal data at offset 3: unknown type code 0x5e '^'");
  CHECK(error_of("\x01") == "bad marshal data at offset 0: unknown type code 0x01");
  CHECK(error_of("[" + i32(0)) ==
        "bad marshal data at offset 0: list objects (type code 0x5b '[') are not supported: "
        "they never occur in code objects");
  CHECK(error_of("{0") ==
        "bad marshal data at offset 0: dict objects (type code 0x7b '{') are not supported: "
        "they never occur in code objects");
  CHECK(error_of("\xbc" + i32(0)) ==
        "bad marshal data at offset 0: set objects (type code 0x3c '<') are not supported: they "
        "never occur in code objects");
  CHECK(error_of("?") ==
        "bad marshal data at offset 0: an unmarshallable object was written here (type code "
        "'?')");
  CHECK(error_of(":NNN") ==
        "bad marshal data at offset 0: slice objects (type code ':') belong to marshal version "
        "5 (Python 3.14+)");
  CHECK(error_of("0") ==
        "bad marshal data at offset 0: NULL object (type code '0') where an object was "
        "expected");
  CHECK(error_of(small_tuple({"N", "0"})) ==
        "bad marshal data at offset 3: NULL object in a tuple");
}

TEST_CASE("marshal: bad references") {
  CHECK(error_of("r" + i32(5)) ==
        "bad marshal data at offset 0: invalid reference index 5 (0 objects recorded so far)");
  CHECK(error_of(small_tuple({"\xe9" + i32(1), "r" + i32(-1)})) ==
        "bad marshal data at offset 7: invalid reference index -1 (1 objects recorded so far)");
  // A tuple that contains itself: CPython would build a cycle, dynvm refuses.
  CHECK(error_of("\xa9" + u8(1) + "r" + i32(0)) ==
        "bad marshal data at offset 2: reference 0 is to an object still being read (a cycle)");
  CodeFields fields;
  fields.consts = small_tuple({"r" + i32(0)});
  CHECK(error_of(fields.encode('c' | 0x80)).find("still being read (a cycle)") !=
        std::string::npos);
}

TEST_CASE("marshal: declared sizes are checked before allocating") {
  CHECK(error_of("(" + i32(0x7FFFFFFF)) ==
        "bad marshal data at offset 1: tuple size 2147483647 exceeds the 0 bytes left");
  CHECK(error_of(">" + i32(1000) + "NN") ==
        "bad marshal data at offset 1: frozenset size 1000 exceeds the 2 bytes left");
  CHECK(error_of(")" + u8(3) + "NN") ==
        "bad marshal data at offset 1: tuple size 3 exceeds the 2 bytes left");
  CHECK(error_of("u" + i32(0x7FFFFFFF)) ==
        "bad marshal data at offset 1: string size 2147483647 exceeds the 0 bytes left");
  CHECK(error_of("a" + i32(-1)) == "bad marshal data at offset 1: string size is negative (-1)");
  CHECK(error_of("s" + i32(INT32_MIN)) ==
        "bad marshal data at offset 1: bytes object size is negative (-2147483648)");
  CHECK(error_of("l" + i32(1000000) + std::string("\x01\x00", 2)) ==
        "bad marshal data at offset 1: long int digit count 1000000 exceeds the 2 bytes left");
  CHECK(error_of("l" + i32(INT32_MIN)) ==
        "bad marshal data at offset 1: long int digit count out of range");
}

TEST_CASE("marshal: malformed long ints") {
  CHECK(error_of("l" + i32(1) + std::string("\x00\x80", 2)) ==
        "bad marshal data at offset 5: long int digit 32768 out of range (>= 2**15)");
  CHECK(error_of("l" + i32(2) + std::string("\x01\x00\x00\x00", 4)) ==
        "bad marshal data at offset 7: unnormalized long int (most significant digit is 0)");
}

TEST_CASE("marshal: invalid UTF-8") {
  CHECK(error_of(unicode_object("ok\xff")) ==
        "bad marshal data at offset 7: invalid UTF-8 in a string");
  CHECK(error_of(unicode_object("\xc0\x80")) ==
        "bad marshal data at offset 5: invalid UTF-8 in a string");  // overlong
  CHECK(error_of(unicode_object("\xf4\x90\x80\x80")) ==
        "bad marshal data at offset 5: invalid UTF-8 in a string");  // above U+10FFFF
  CHECK(error_of(unicode_object("a\xe6\x97")) ==
        "bad marshal data at offset 6: invalid UTF-8 in a string");  // cut short
}

TEST_CASE("marshal: nesting depth is limited") {
  std::string ok_nesting;
  for (int i = 0; i < 1999; ++i) ok_nesting += ")\x01";
  ok_nesting += "N";
  CHECK(read_marshal_object(ok_nesting).ok());  // 2000 levels, like CPython allows

  std::string too_deep;
  for (int i = 0; i < 2000; ++i) too_deep += ")\x01";
  too_deep += "N";
  CHECK(error_of(too_deep) ==
        "bad marshal data at offset 4000: objects nested deeper than 2000 levels");

  MarshalReadOptions options;
  options.max_depth = 3;
  CHECK(error_of(")\x01)\x01)\x01N", options) ==
        "bad marshal data at offset 6: objects nested deeper than 3 levels");

  // Deep nesting through code objects does not overflow the stack either.
  std::string nested_code = "N";
  for (int i = 0; i < 2100; ++i) {
    CodeFields fields;
    fields.consts = small_tuple({nested_code});
    nested_code = fields.encode();
  }
  CHECK(error_of(nested_code).find("objects nested deeper than 2000 levels") != std::string::npos);
}

TEST_CASE("marshal: malformed code objects") {
  CodeFields wrong_consts;
  wrong_consts.consts = short_ascii("oops");
  CHECK(error_of(wrong_consts.encode()) ==
        "bad marshal data at offset 32: code object field co_consts must be tuple, not str");

  CodeFields wrong_name;
  wrong_name.names = small_tuple({"i" + i32(3)});
  CHECK(error_of(wrong_name.encode()) ==
        "bad marshal data at offset 35: code object field co_names must hold only str, not int");

  CodeFields null_field;
  null_field.filename = "0";
  CHECK(error_of(null_field.encode()) ==
        "bad marshal data at offset 44: code object field co_filename is NULL");

  CodeFields odd_code;
  odd_code.code = bytes_object("abc");
  CHECK(error_of(odd_code.encode()) ==
        "bad marshal data at offset 0: code object f: co_code has an odd number of bytes (3)");

  CodeFields kinds_mismatch;
  kinds_mismatch.localsplusnames = small_tuple({short_ascii("x")});
  CHECK(error_of(kinds_mismatch.encode()) ==
        "bad marshal data at offset 42: code object f: co_localspluskinds has 0 entries for 1 "
        "names");

  CodeFields too_few_locals;
  too_few_locals.argcount = 1;
  CHECK(error_of(too_few_locals.encode()) ==
        "bad marshal data at offset 0: code object f: co_varnames is too small: 1 arguments but "
        "0 local names");

  CodeFields bad_counts;
  bad_counts.posonlyargcount = 1;
  CHECK(error_of(bad_counts.encode()) ==
        "bad marshal data at offset 0: code object f: invalid argument counts (argcount 0, "
        "posonlyargcount 1, kwonlyargcount 0)");

  CodeFields negative_stack;
  negative_stack.stacksize = -1;
  CHECK(error_of(negative_stack.encode()) ==
        "bad marshal data at offset 0: code object f: negative co_stacksize -1");

  MarshalReadOptions old_python;
  old_python.version = PythonVersion{3, 10};
  CHECK(error_of(CodeFields().encode(), old_python) ==
        "bad marshal data at offset 0: code objects of Python 3.10 are not supported (dynvm "
        "reads 3.11, 3.12 and 3.13)");
  MarshalReadOptions new_python;
  new_python.version = PythonVersion{3, 14};
  CHECK(error_of(CodeFields().encode(), new_python) ==
        "bad marshal data at offset 0: code objects of Python 3.14 are not supported (dynvm "
        "reads 3.11, 3.12 and 3.13)");

  CHECK(read_marshal_code("i" + i32(1)).error().message ==
        "bad marshal data at offset 0: expected a code object, found int");
}

TEST_CASE("marshal: error offsets can be file offsets") {
  MarshalReadOptions options;
  options.offset_base = 16;
  CHECK(error_of("^", options) == "bad marshal data at offset 16: unknown type code 0x5e '^'");
}

TEST_CASE("marshal: shared objects cannot make code objects copy without bound") {
  // One 1 MiB name referenced 100 times from co_names: 100 MiB of copies from 1 MiB.
  CodeFields fields;
  std::string names = "(" + i32(100) + "\xe1" + i32(1 << 20) + std::string(1 << 20, 'n');
  for (int i = 1; i < 100; ++i) names += "r" + i32(0);
  fields.names = names;
  CHECK(error_of(fields.encode()) ==
        "bad marshal data at offset 35: code objects copy more data than the input can justify "
        "(shared objects referenced too often)");

  // A few references, as real code has, are fine.
  CodeFields modest;
  modest.names = small_tuple({"\xfa" + u8(3) + "abc", "r" + i32(0), "r" + i32(0)});
  CHECK(read_marshal_code(modest.encode()).ok());
}
