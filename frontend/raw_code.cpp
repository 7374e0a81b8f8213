// BigInt arithmetic for printing, and Constant::repr() matching CPython 3.11's repr().
#include "dynvm/frontend/raw_code.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dynvm::frontend {
namespace {

constexpr uint32_t kDigitBits = 15;
constexpr uint32_t kDigitMask = (1u << kDigitBits) - 1;

// Inclusive ranges of code points str.isprintable() rejects, sorted.
struct CodePointRange {
  uint32_t first;
  uint32_t last;
};
constexpr CodePointRange kNonPrintable[] = {
#include "unicode_printable.inc"
};

bool is_printable(uint32_t cp) {
  const CodePointRange* end = std::end(kNonPrintable);
  // The first range that ends at or after cp is the only one that may contain it.
  const CodePointRange* it = std::lower_bound(
      std::begin(kNonPrintable), end, cp,
      [](const CodePointRange& range, uint32_t value) { return range.last < value; });
  return it == end || cp < it->first;
}

constexpr char kHexDigits[] = "0123456789abcdef";

void append_hex(std::string& out, uint32_t value, int width) {
  for (int shift = 4 * (width - 1); shift >= 0; shift -= 4) {
    out += kHexDigits[(value >> shift) & 0xF];
  }
}

// Decodes one code point of UTF-8 in which surrogates may appear (as CPython's
// "surrogatepass" writes them). An invalid sequence yields U+FFFD and consumes one
// byte, so printing never fails on a malformed string.
uint32_t decode_utf8(const std::string& s, size_t& pos) {
  constexpr uint32_t kReplacement = 0xFFFD;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  size_t length = 0;
  uint32_t cp = 0;
  uint32_t min_value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F, min_value = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F, min_value = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07, min_value = 0x10000;
  } else {
    ++pos;
    return kReplacement;
  }
  if (s.size() - pos < length) {
    ++pos;
    return kReplacement;
  }
  for (size_t i = 1; i < length; ++i) {
    const unsigned char c = byte(pos + i);
    if ((c & 0xC0) != 0x80) {
      ++pos;
      return kReplacement;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min_value || cp > 0x10FFFF) {
    ++pos;
    return kReplacement;
  }
  pos += length;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Python prefers single quotes and switches to double quotes only when that avoids
// escaping: the text has a single quote and no double quote.
char choose_quote(const std::string& text) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  return has_single && !has_double ? '"' : '\'';
}

// The escapes str and bytes share; false when `c` needs the caller's own treatment.
bool append_common_escape(std::string& out, uint32_t c, char quote) {
  if (c == static_cast<uint32_t>(quote) || c == '\\') {
    out += '\\';
    out += static_cast<char>(c);
  } else if (c == '\t') {
    out += "\\t";
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c < ' ' || c == 0x7F) {
    out += "\\x";
    append_hex(out, c, 2);
  } else if (c < 0x7F) {
    out += static_cast<char>(c);
  } else {
    return false;
  }
  return true;
}

std::string str_repr(const std::string& utf8) {
  const char quote = choose_quote(utf8);
  std::string out(1, quote);
  for (size_t pos = 0; pos < utf8.size();) {
    const uint32_t cp = decode_utf8(utf8, pos);
    if (append_common_escape(out, cp, quote)) continue;
    if (is_printable(cp)) {
      append_utf8(out, cp);
    } else if (cp <= 0xFF) {
      out += "\\x";
      append_hex(out, cp, 2);
    } else if (cp <= 0xFFFF) {
      out += "\\u";
      append_hex(out, cp, 4);
    } else {
      out += "\\U";
      append_hex(out, cp, 8);
    }
  }
  out += quote;
  return out;
}

std::string bytes_repr(const std::string& bytes) {
  const char quote = choose_quote(bytes);
  std::string out = "b";
  out += quote;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (!append_common_escape(out, c, quote)) {
      out += "\\x";
      append_hex(out, c, 2);
    }
  }
  out += quote;
  return out;
}

// A double as Python's repr-style formatting prints it ('r' format code): the
// shortest digits that round-trip, in positional notation when the decimal point
// position is in (-4, 16], else in exponent notation with at least two exponent
// digits. `add_dot_zero` appends ".0" to integral positional values (float repr
// does, complex repr does not); `force_sign` prints '+' for non-negative values.
std::string format_double(double x, bool add_dot_zero, bool force_sign) {
  if (std::isnan(x)) return force_sign ? "+nan" : "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : (force_sign ? "+inf" : "inf");

  // Shortest round-trip digits in the form "[-]d[.ddd]e(+|-)dd".
  std::array<char, 64> buffer{};
  const auto result =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), x, std::chars_format::scientific);
  const std::string scientific(buffer.data(), result.ptr);
  const size_t e_pos = scientific.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (scientific[i] >= '0' && scientific[i] <= '9') digits += scientific[i];
  }
  const int exponent = std::atoi(scientific.c_str() + e_pos + 1);
  const int decimal_point = exponent + 1;  // digits "d1d2..." mean 0.d1d2... * 10**decimal_point

  std::string out;
  if (std::signbit(x)) {
    out += '-';
  } else if (force_sign) {
    out += '+';
  }
  const int ndigits = static_cast<int>(digits.size());
  if (decimal_point <= -4 || decimal_point > 16) {
    out += digits[0];
    if (ndigits > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    const int e = decimal_point - 1;
    out += e < 0 ? "e-" : "e+";
    if (std::abs(e) < 10) out += '0';
    out += std::to_string(std::abs(e));
  } else if (decimal_point <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decimal_point), '0');
    out += digits;
  } else if (decimal_point >= ndigits) {
    out += digits;
    out.append(static_cast<size_t>(decimal_point - ndigits), '0');
    if (add_dot_zero) out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decimal_point));
    out += '.';
    out.append(digits, static_cast<size_t>(decimal_point), std::string::npos);
  }
  return out;
}

std::string complex_repr(std::complex<double> c) {
  // A +0.0 real part is left out, and so are the parentheses; -0.0 is printed.
  if (c.real() == 0.0 && !std::signbit(c.real())) {
    return format_double(c.imag(), false, false) + "j";
  }
  return "(" + format_double(c.real(), false, false) + format_double(c.imag(), false, true) + "j)";
}

std::string items_repr(const std::vector<ConstantPtr>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i] ? items[i]->repr() : "<NULL>";
  }
  return out;
}

std::string code_repr(const RawCode* code) {
  if (code == nullptr) return "<code object <NULL>>";
  // dis prints names and file names raw, not as string literals.
  return "<code object " + code->name + " at " + kCodeReprAddress + ", file \"" + code->filename +
         "\", line " + std::to_string(code->firstlineno) + ">";
}

}  // namespace

std::string PythonVersion::to_string() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

BigInt BigInt::from_int64(int64_t value) {
  BigInt result;
  result.negative = value < 0;
  result.fits_int64 = true;
  result.small = value;
  // Two's complement magnitude, correct for INT64_MIN too.
  uint64_t magnitude = static_cast<uint64_t>(value);
  if (result.negative) magnitude = ~magnitude + 1;
  while (magnitude != 0) {
    result.digits15.push_back(static_cast<uint16_t>(magnitude & kDigitMask));
    magnitude >>= kDigitBits;
  }
  return result;
}

BigInt BigInt::from_digits15(bool negative, std::vector<uint16_t> digits) {
  BigInt result;
  while (!digits.empty() && digits.back() == 0) digits.pop_back();
  result.negative = negative && !digits.empty();
  result.digits15 = std::move(digits);

  // Fold the magnitude into 64 bits, most significant digit first, as long as it fits.
  uint64_t magnitude = 0;
  bool fits_u64 = true;
  for (auto it = result.digits15.rbegin(); it != result.digits15.rend(); ++it) {
    if (magnitude > (UINT64_MAX >> kDigitBits)) {
      fits_u64 = false;
      break;
    }
    magnitude = (magnitude << kDigitBits) | (*it & kDigitMask);
  }
  constexpr uint64_t kMinMagnitude = uint64_t{1} << 63;  // |INT64_MIN|
  if (!fits_u64) {
    result.fits_int64 = false;
  } else if (result.negative) {
    result.fits_int64 = magnitude <= kMinMagnitude;
    if (result.fits_int64) {
      result.small = magnitude == kMinMagnitude ? INT64_MIN : -static_cast<int64_t>(magnitude);
    }
  } else {
    result.fits_int64 = magnitude <= static_cast<uint64_t>(INT64_MAX);
    if (result.fits_int64) result.small = static_cast<int64_t>(magnitude);
  }
  return result;
}

std::string BigInt::to_decimal() const {
  if (fits_int64) return std::to_string(small);

  // Schoolbook conversion to base 10**9 limbs, least significant first, fed 30 bits
  // (two digits) at a time: limb * 2**30 + carry stays below 2**64.
  constexpr uint64_t kLimbBase = 1000000000;
  std::vector<uint32_t> limbs;
  const auto feed = [&limbs](uint64_t chunk, uint32_t bits) {
    uint64_t carry = chunk;
    for (uint32_t& limb : limbs) {
      const uint64_t value = (static_cast<uint64_t>(limb) << bits) + carry;
      limb = static_cast<uint32_t>(value % kLimbBase);
      carry = value / kLimbBase;
    }
    while (carry != 0) {
      limbs.push_back(static_cast<uint32_t>(carry % kLimbBase));
      carry /= kLimbBase;
    }
  };
  size_t remaining = digits15.size();
  if (remaining % 2 == 1) {
    --remaining;
    feed(digits15[remaining] & kDigitMask, kDigitBits);
  }
  while (remaining > 0) {
    const uint64_t high = digits15[remaining - 1] & kDigitMask;
    const uint64_t low = digits15[remaining - 2] & kDigitMask;
    remaining -= 2;
    feed((high << kDigitBits) | low, 2 * kDigitBits);
  }
  if (limbs.empty()) return "0";

  std::string out = negative ? "-" : "";
  out += std::to_string(limbs.back());
  for (auto it = limbs.rbegin() + 1; it != limbs.rend(); ++it) {
    std::array<char, 16> buffer{};
    std::snprintf(buffer.data(), buffer.size(), "%09u", static_cast<unsigned>(*it));
    out += buffer.data();
  }
  return out;
}

std::string Constant::repr() const {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Ellipsis:
      return "Ellipsis";
    case Kind::StopIteration:
      return "<class 'StopIteration'>";
    case Kind::Bool:
      return bool_value ? "True" : "False";
    case Kind::Int:
      return int_value.to_decimal();
    case Kind::Float:
      return format_double(float_value, true, false);
    case Kind::Complex:
      return complex_repr(complex_value);
    case Kind::Str:
      return str_repr(bytes);
    case Kind::Bytes:
      return bytes_repr(bytes);
    case Kind::Tuple:
      return "(" + items_repr(items) + (items.size() == 1 ? ",)" : ")");
    case Kind::FrozenSet:
      return items.empty() ? "frozenset()" : "frozenset({" + items_repr(items) + "})";
    case Kind::Code:
      return code_repr(code.get());
  }
  return "<unknown constant>";
}

}  // namespace dynvm::frontend
