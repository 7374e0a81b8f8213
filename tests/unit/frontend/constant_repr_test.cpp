// Constant::repr() against what CPython 3.11's repr() prints, kind by kind, and the
// BigInt helpers it rests on.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/raw_code.h"

using dynvm::frontend::BigInt;
using dynvm::frontend::Constant;
using dynvm::frontend::ConstantPtr;
using dynvm::frontend::RawCode;

namespace {

ConstantPtr make(Constant::Kind kind) {
  auto constant = std::make_shared<Constant>();
  constant->kind = kind;
  return constant;
}

ConstantPtr integer(int64_t value) {
  auto constant = std::make_shared<Constant>();
  constant->kind = Constant::Kind::Int;
  constant->int_value = BigInt::from_int64(value);
  return constant;
}

ConstantPtr str(const std::string& utf8) {
  auto constant = std::make_shared<Constant>();
  constant->kind = Constant::Kind::Str;
  constant->bytes = utf8;
  return constant;
}

ConstantPtr container(Constant::Kind kind, std::vector<ConstantPtr> items) {
  auto constant = std::make_shared<Constant>();
  constant->kind = kind;
  constant->items = std::move(items);
  return constant;
}

std::string float_repr(double value) {
  Constant constant;
  constant.kind = Constant::Kind::Float;
  constant.float_value = value;
  return constant.repr();
}

std::string complex_repr(double real, double imag) {
  Constant constant;
  constant.kind = Constant::Kind::Complex;
  constant.complex_value = {real, imag};
  return constant.repr();
}

std::string str_repr(const std::string& utf8) { return str(utf8)->repr(); }

std::string bytes_repr(const std::string& bytes) {
  Constant constant;
  constant.kind = Constant::Kind::Bytes;
  constant.bytes = bytes;
  return constant.repr();
}

// 2**exponent from 15-bit digits.
BigInt power_of_two(int exponent, bool negative = false) {
  std::vector<uint16_t> digits(static_cast<size_t>(exponent / 15) + 1, 0);
  digits.back() = static_cast<uint16_t>(1u << (exponent % 15));
  return BigInt::from_digits15(negative, digits);
}

}  // namespace

TEST_CASE("repr: singletons") {
  CHECK(make(Constant::Kind::None)->repr() == "None");
  CHECK(make(Constant::Kind::Ellipsis)->repr() == "Ellipsis");
  CHECK(make(Constant::Kind::StopIteration)->repr() == "<class 'StopIteration'>");
  auto yes = std::make_shared<Constant>();
  yes->kind = Constant::Kind::Bool;
  yes->bool_value = true;
  CHECK(yes->repr() == "True");
  CHECK(make(Constant::Kind::Bool)->repr() == "False");
}

TEST_CASE("repr: ints of any size") {
  CHECK(integer(0)->repr() == "0");
  CHECK(integer(-1)->repr() == "-1");
  CHECK(integer(INT64_MAX)->repr() == "9223372036854775807");
  CHECK(integer(INT64_MIN)->repr() == "-9223372036854775808");
  CHECK(power_of_two(63).to_decimal() == "9223372036854775808");
  CHECK(power_of_two(64, true).to_decimal() == "-18446744073709551616");
  CHECK(power_of_two(100).to_decimal() == "1267650600228229401496703205376");
  CHECK(power_of_two(1000, true).to_decimal() ==
        "-107150860718626732094842504906000181056140481170553360744375038837035105112493612249319"
        "8378815695858127594672917553146825187145285692314043598457757469857480393456777482423098"
        "5421074605062371141877954182153046474983581941267398767559165543946077062914571196477686"
        "542167660429831652624386837205668069376");
}

TEST_CASE("repr: BigInt normalizes and knows when it fits int64") {
  const BigInt zero = BigInt::from_digits15(true, {0, 0});
  CHECK(zero.digits15.empty());
  CHECK_FALSE(zero.negative);
  CHECK(zero.fits_int64);
  CHECK(zero.to_decimal() == "0");

  const BigInt min = power_of_two(63, true);
  CHECK(min.fits_int64);
  CHECK(min.small == INT64_MIN);
  CHECK_FALSE(power_of_two(63).fits_int64);
  CHECK(power_of_two(62).fits_int64);
  CHECK(power_of_two(62).small == int64_t{1} << 62);

  const BigInt from_small = BigInt::from_int64(-32768 * 3 - 5);
  CHECK(from_small.negative);
  CHECK(from_small.digits15 == std::vector<uint16_t>{5, 3});
  CHECK(BigInt::from_int64(INT64_MIN).digits15 == power_of_two(63).digits15);
}

TEST_CASE("repr: floats use Python's shortest round-trip form") {
  const double inf = std::numeric_limits<double>::infinity();
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},           {-0.0, "-0.0"},
      {1.0, "1.0"},           {-2.5, "-2.5"},
      {0.1, "0.1"},           {1.0 / 3, "0.3333333333333333"},
      {1e-05, "1e-05"},       {2.5e-05, "2.5e-05"},
      {0.0001, "0.0001"},     {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},        {123456789012345678.0, "1.2345678901234568e+17"},
      {1e22, "1e+22"},        {1.5e300, "1.5e+300"},
      {5e-324, "5e-324"},     {1.7976931348623157e308, "1.7976931348623157e+308"},
      {123.456, "123.456"},   {inf, "inf"},
      {-inf, "-inf"},         {std::nan(""), "nan"},
      {-std::nan(""), "nan"},
  };
  for (const auto& [value, expected] : cases) CHECK(float_repr(value) == expected);
}

TEST_CASE("repr: complex numbers") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::nan("");
  CHECK(complex_repr(0.0, 0.0) == "0j");
  CHECK(complex_repr(-0.0, 0.0) == "(-0+0j)");
  CHECK(complex_repr(0.0, -0.0) == "-0j");
  CHECK(complex_repr(-0.0, -0.0) == "(-0-0j)");
  CHECK(complex_repr(1.0, 2.0) == "(1+2j)");
  CHECK(complex_repr(0.0, 2.0) == "2j");
  CHECK(complex_repr(-0.0, -1.0) == "(-0-1j)");
  CHECK(complex_repr(1.0, nan) == "(1+nanj)");
  CHECK(complex_repr(1.0, -nan) == "(1+nanj)");
  CHECK(complex_repr(inf, -inf) == "(inf-infj)");
  CHECK(complex_repr(0.0, 1e16) == "1e+16j");
  CHECK(complex_repr(1.5, 1e-05) == "(1.5+1e-05j)");
  CHECK(complex_repr(0.0, nan) == "nanj");
  CHECK(complex_repr(nan, 1.0) == "(nan+1j)");
}

TEST_CASE("repr: str quotes and escapes like Python") {
  CHECK(str_repr("") == "''");
  CHECK(str_repr("abc") == "'abc'");
  CHECK(str_repr("it's") == "\"it's\"");
  CHECK(str_repr("say \"hi\"") == "'say \"hi\"'");
  CHECK(str_repr("'\"") == "'\\'\"'");
  CHECK(str_repr("back\\slash") == "'back\\\\slash'");
  CHECK(str_repr("\t\n\r") == "'\\t\\n\\r'");
  CHECK(str_repr(std::string("\x00\x1f\x7f", 3)) == "'\\x00\\x1f\\x7f'");
  // Non-ASCII: printable characters stay, the others are escaped by size.
  CHECK(str_repr("\xc2\x80\xc2\xa0\xc2\xad") == "'\\x80\\xa0\\xad'");
  CHECK(str_repr("\xc3\xa9t\xc3\xa9") == "'\xc3\xa9t\xc3\xa9'");
  CHECK(str_repr("\xe6\x97\xa5\xe6\x9c\xac") == "'\xe6\x97\xa5\xe6\x9c\xac'");
  CHECK(str_repr("\xe2\x80\x8b") == "'\\u200b'");               // zero width space (Cf)
  CHECK(str_repr("\xe2\x80\xa8") == "'\\u2028'");               // line separator (Zl)
  CHECK(str_repr("\xe3\x80\x80") == "'\\u3000'");               // ideographic space (Zs)
  CHECK(str_repr("\xcd\xb8") == "'\\u0378'");                   // unassigned (Cn)
  CHECK(str_repr("\xed\xa0\x80") == "'\\ud800'");               // lone surrogate (Cs)
  CHECK(str_repr("\xee\x80\x80") == "'\\ue000'");               // private use (Co)
  CHECK(str_repr("\xf0\x9f\x98\x80") == "'\xf0\x9f\x98\x80'");  // emoji, printable
  CHECK(str_repr("\xf3\xa0\x80\x81") == "'\\U000e0001'");       // language tag (Cf)
  CHECK(str_repr("\xf4\x8f\xbf\xbf") == "'\\U0010ffff'");       // noncharacter
  CHECK(str_repr(" ") == "' '");
  // Bytes that are not UTF-8 (not producible by the readers) print as U+FFFD.
  CHECK(str_repr("a\xff") == "'a\xef\xbf\xbd'");
}

TEST_CASE("repr: bytes") {
  CHECK(bytes_repr("") == "b''");
  CHECK(bytes_repr("abc") == "b'abc'");
  CHECK(bytes_repr("'") == "b\"'\"");
  CHECK(bytes_repr("'\"") == "b'\\'\"'");
  CHECK(bytes_repr(std::string("\x00\xff\x7f\t\n\r\\", 7)) == "b'\\x00\\xff\\x7f\\t\\n\\r\\\\'");
  CHECK(bytes_repr("\xc3\xa9") == "b'\\xc3\\xa9'");
}

TEST_CASE("repr: tuples and frozensets") {
  using Kind = Constant::Kind;
  CHECK(container(Kind::Tuple, {})->repr() == "()");
  CHECK(container(Kind::Tuple, {integer(1)})->repr() == "(1,)");
  CHECK(container(Kind::Tuple, {integer(1), str("a"), container(Kind::Tuple, {integer(2)})})
            ->repr() == "(1, 'a', (2,))");
  CHECK(container(Kind::FrozenSet, {})->repr() == "frozenset()");
  // Elements keep the order they were given in.
  CHECK(container(Kind::FrozenSet, {integer(2), integer(1)})->repr() == "frozenset({2, 1})");
  CHECK(container(Kind::Tuple, {container(Kind::FrozenSet, {str("x")})})->repr() ==
        "(frozenset({'x'}),)");
}

TEST_CASE("repr: code objects print like dis, with a fixed address") {
  auto code = std::make_shared<RawCode>();
  code->name = "<lambda>";
  code->filename = "dir/it's.py";
  code->firstlineno = 12;
  auto constant = std::make_shared<Constant>();
  constant->kind = Constant::Kind::Code;
  constant->code = code;
  CHECK(constant->repr() == "<code object <lambda> at 0x0, file \"dir/it's.py\", line 12>");
}
