// The marshal reader: CPython's marshal format version 4 to Constant/RawCode.
//
// Format facts (CPython's Python/marshal.c): every object starts with a type byte
// whose bit 0x80 (FLAG_REF) asks the reader to remember the object in a table that
// later 'r' records index. Containers take their table slot before their children are
// read, leaves after they are read, singletons (None, True, ...) never. Integers are
// little-endian; sizes are signed 32-bit.
#include "dynvm/frontend/marshal_reader.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/frontend/opcode.h"

namespace dynvm::frontend {
namespace {

// Type codes of marshal version 4.
enum TypeCode : uint8_t {
  kTypeNull = '0',
  kTypeNone = 'N',
  kTypeFalse = 'F',
  kTypeTrue = 'T',
  kTypeStopIteration = 'S',
  kTypeEllipsis = '.',
  kTypeInt = 'i',
  kTypeInt64 = 'I',  // no longer written, still read
  kTypeFloat = 'f',
  kTypeBinaryFloat = 'g',
  kTypeComplex = 'x',
  kTypeBinaryComplex = 'y',
  kTypeLong = 'l',
  kTypeBytes = 's',
  kTypeInterned = 't',
  kTypeRef = 'r',
  kTypeTuple = '(',
  kTypeList = '[',
  kTypeDict = '{',
  kTypeCode = 'c',
  kTypeUnicode = 'u',
  kTypeUnknown = '?',
  kTypeSet = '<',
  kTypeFrozenSet = '>',
  kTypeAscii = 'a',
  kTypeAsciiInterned = 'A',
  kTypeSmallTuple = ')',
  kTypeShortAscii = 'z',
  kTypeShortAsciiInterned = 'Z',
  kTypeSlice = ':',  // marshal version 5 (Python 3.14)
};
constexpr uint8_t kFlagRef = 0x80;

// Code object flags the validation needs (CPython's CO_VARARGS, CO_VARKEYWORDS).
constexpr uint32_t kCoVarargs = 0x04;
constexpr uint32_t kCoVarkeywords = 0x08;

// Code objects copy strings and constant lists out of shared marshal objects; back
// references let a small input ask for many copies. The copies may total this much
// plus kCopyBudgetPerInputByte times the input size, far above what real code needs.
constexpr size_t kMinCopyBudget = size_t{16} << 20;
constexpr size_t kCopyBudgetPerInputByte = 16;

ConstantPtr make_singleton(Constant::Kind kind, bool value = false) {
  auto constant = std::make_shared<Constant>();
  constant->kind = kind;
  constant->bool_value = value;
  return constant;
}

// Singletons are shared so that a run of 'N' bytes costs no allocations.
const ConstantPtr& none_constant() {
  static const ConstantPtr constant = make_singleton(Constant::Kind::None);
  return constant;
}
const ConstantPtr& ellipsis_constant() {
  static const ConstantPtr constant = make_singleton(Constant::Kind::Ellipsis);
  return constant;
}
const ConstantPtr& stop_iteration_constant() {
  static const ConstantPtr constant = make_singleton(Constant::Kind::StopIteration);
  return constant;
}
const ConstantPtr& bool_constant(bool value) {
  static const ConstantPtr true_constant = make_singleton(Constant::Kind::Bool, true);
  static const ConstantPtr false_constant = make_singleton(Constant::Kind::Bool, false);
  return value ? true_constant : false_constant;
}

// Small ints and empty tuples and strings, which real code holds by the thousand, are
// shared too. Each one is created on first use.
constexpr int32_t kFirstCachedInt = -5;
constexpr int32_t kLastCachedInt = 256;

const ConstantPtr& small_int_constant(int32_t value) {
  static const std::vector<ConstantPtr> cache = [] {
    std::vector<ConstantPtr> constants;
    for (int32_t v = kFirstCachedInt; v <= kLastCachedInt; ++v) {
      auto constant = std::make_shared<Constant>();
      constant->kind = Constant::Kind::Int;
      constant->int_value = BigInt::from_int64(v);
      constants.push_back(std::move(constant));
    }
    return constants;
  }();
  return cache[static_cast<size_t>(value - kFirstCachedInt)];
}
const ConstantPtr& empty_constant(Constant::Kind kind) {
  static const ConstantPtr empty_tuple = make_singleton(Constant::Kind::Tuple);
  static const ConstantPtr empty_str = make_singleton(Constant::Kind::Str);
  static const ConstantPtr empty_bytes = make_singleton(Constant::Kind::Bytes);
  return kind == Constant::Kind::Tuple ? empty_tuple
         : kind == Constant::Kind::Str ? empty_str
                                       : empty_bytes;
}

std::string describe_type_code(uint8_t code) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  out += kHex[code >> 4];
  out += kHex[code & 0xF];
  if (code >= 0x20 && code < 0x7F) {
    out += " '";
    out += static_cast<char>(code);
    out += "'";
  }
  return out;
}

const char* kind_name(Constant::Kind kind) {
  switch (kind) {
    case Constant::Kind::None:
      return "None";
    case Constant::Kind::Ellipsis:
      return "Ellipsis";
    case Constant::Kind::StopIteration:
      return "StopIteration";
    case Constant::Kind::Bool:
      return "bool";
    case Constant::Kind::Int:
      return "int";
    case Constant::Kind::Float:
      return "float";
    case Constant::Kind::Complex:
      return "complex";
    case Constant::Kind::Str:
      return "str";
    case Constant::Kind::Bytes:
      return "bytes";
    case Constant::Kind::Tuple:
      return "tuple";
    case Constant::Kind::FrozenSet:
      return "frozenset";
    case Constant::Kind::Code:
      return "code";
  }
  return "?";
}

// True when `text` is UTF-8 in which encoded surrogates are allowed, which is what
// CPython's decoder accepts with the "surrogatepass" handler marshal uses. On failure
// `bad_at` is the offset of the first byte of the bad sequence.
bool is_valid_utf8(std::string_view text, size_t& bad_at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char lead = byte(pos);
    size_t length = 0;
    uint32_t cp = 0;
    uint32_t min_value = 0;
    if (lead < 0x80) {
      ++pos;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, cp = lead & 0x1F, min_value = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, cp = lead & 0x0F, min_value = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, cp = lead & 0x07, min_value = 0x10000;
    } else {
      bad_at = pos;
      return false;
    }
    if (text.size() - pos < length) {
      bad_at = pos;
      return false;
    }
    for (size_t i = 1; i < length; ++i) {
      const unsigned char c = byte(pos + i);
      if ((c & 0xC0) != 0x80) {
        bad_at = pos;
        return false;
      }
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min_value || cp > 0x10FFFF) {
      bad_at = pos;
      return false;
    }
    pos += length;
  }
  return true;
}

// The ASCII string types hold one byte per character; CPython builds them as
// Latin-1, so a byte above 0x7F (never written by CPython) means U+0080..U+00FF.
std::string latin1_to_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// The power of ten of the first significant digit of a decimal float text ("0.05e3"
// gives 1), to tell whether a text that does not fit a double overflows or underflows.
int decimal_magnitude(std::string_view text) {
  int integer_digits = 0;  // significant digits before the point
  int fraction_zeros = 0;  // zeros after the point before the first significant digit
  bool seen_point = false;
  bool seen_significant = false;
  size_t i = 0;
  for (; i < text.size() && (text[i] == '.' || (text[i] >= '0' && text[i] <= '9')); ++i) {
    const char c = text[i];
    if (c == '.') {
      seen_point = true;
      continue;
    }
    if (c != '0') seen_significant = true;
    if (!seen_point && seen_significant) {
      ++integer_digits;
    } else if (seen_point && !seen_significant) {
      ++fraction_zeros;
    }
  }
  int magnitude = integer_digits > 0 ? integer_digits - 1 : -(fraction_zeros + 1);
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    const long exponent = std::strtol(std::string(text.substr(i + 1)).c_str(), nullptr, 10);
    magnitude += static_cast<int>(std::clamp<long>(exponent, -1000000, 1000000));
  }
  return magnitude;
}

// Parses the text of a TYPE_FLOAT/TYPE_COMPLEX part the way PyOS_string_to_double
// does: an optional sign, then decimal digits, "inf", "infinity" or "nan" in any case.
bool parse_float_text(std::string_view text, double& value) {
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  // from_chars takes no sign of its own here and no hexadecimal form, like Python.
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  double parsed = 0.0;
  const auto result =
      std::from_chars(text.data(), text.data() + text.size(), parsed, std::chars_format::general);
  if (result.ptr != text.data() + text.size()) return false;
  if (result.ec == std::errc::result_out_of_range) {
    // Python rounds to infinity or zero instead of failing.
    parsed = decimal_magnitude(text) > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  } else if (result.ec != std::errc()) {
    return false;
  }
  value = negative ? -parsed : parsed;
  return true;
}

double double_from_le_bytes(std::string_view bytes) {
  uint64_t bits = 0;
  for (int i = 7; i >= 0; --i) {
    bits = (bits << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  }
  double value = 0.0;
  static_assert(sizeof(value) == sizeof(bits), "IEEE 754 binary64 expected");
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

class MarshalReader {
 public:
  MarshalReader(std::string_view data, const MarshalReadOptions& options)
      : data_(data), options_(options) {
    copy_budget_ = kMinCopyBudget;
    if (data.size() <
        (std::numeric_limits<size_t>::max() - kMinCopyBudget) / kCopyBudgetPerInputByte) {
      copy_budget_ += data.size() * kCopyBudgetPerInputByte;
    }
  }

  Expected<ConstantPtr> read_top_level() {
    const size_t start = pos_;
    ConstantPtr object = read_object();
    if (error_) return std::move(*error_);
    if (!object)
      return fail_error(start, "NULL object (type code '0') where an object was expected");
    return object;
  }

 private:
  // Records the first error; every reading function returns false/nullptr after it.
  bool fail(size_t offset, const std::string& what) {
    if (!error_) {
      error_ = make_error("bad marshal data at offset " +
                          std::to_string(options_.offset_base + offset) + ": " + what);
    }
    return false;
  }
  Error fail_error(size_t offset, const std::string& what) {
    fail(offset, what);
    return std::move(*error_);
  }

  size_t remaining() const { return data_.size() - pos_; }

  bool take(size_t n, const char* what, std::string_view& out) {
    if (remaining() < n) {
      return fail(pos_, std::string("truncated data: ") + what + " needs " + std::to_string(n) +
                            (n == 1 ? " byte, " : " bytes, ") + std::to_string(remaining()) +
                            " left");
    }
    out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  bool read_u8(const char* what, uint8_t& value) {
    std::string_view bytes;
    if (!take(1, what, bytes)) return false;
    value = static_cast<uint8_t>(bytes[0]);
    return true;
  }

  bool read_i32(const char* what, int32_t& value) {
    std::string_view bytes;
    if (!take(4, what, bytes)) return false;
    uint32_t bits = 0;
    for (int i = 3; i >= 0; --i) {
      bits = (bits << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    }
    value = static_cast<int32_t>(bits);
    return true;
  }

  // A 32-bit size that must be non-negative and, at `min_bytes_each` bytes per
  // element, fit in what is left of the data: checked before anything is allocated.
  bool read_size(const char* what, size_t min_bytes_each, size_t& size) {
    const size_t at = pos_;
    int32_t n = 0;
    if (!read_i32(what, n)) return false;
    if (n < 0) return fail(at, std::string(what) + " is negative (" + std::to_string(n) + ")");
    return check_fits(at, what, static_cast<size_t>(n), min_bytes_each, size);
  }

  bool check_fits(size_t at, const char* what, size_t n, size_t min_bytes_each, size_t& size) {
    if (n > remaining() / min_bytes_each) {
      return fail(at, std::string(what) + " " + std::to_string(n) + " exceeds the " +
                          std::to_string(remaining()) + " bytes left");
    }
    size = n;
    return true;
  }

  // Reserves a slot in the reference table for an object whose children come first;
  // the slot stays empty (a reference to it is an error) until fill_ref().
  size_t reserve_ref() {
    refs_.emplace_back();
    return refs_.size() - 1;
  }
  void fill_ref(bool flagged, size_t slot, const ConstantPtr& object) {
    if (flagged) refs_[slot] = object;
  }

  ConstantPtr read_object() {
    const size_t start = pos_;
    uint8_t code = 0;
    if (!read_u8("the type code of an object", code)) return nullptr;
    if (depth_ >= options_.max_depth) {
      fail(start, "objects nested deeper than " + std::to_string(options_.max_depth) + " levels");
      return nullptr;
    }
    ++depth_;
    ConstantPtr object = read_object_body(start, code);
    --depth_;
    return object;
  }

  ConstantPtr read_object_body(size_t start, uint8_t code) {
    const bool flagged = (code & kFlagRef) != 0;
    const uint8_t type = code & static_cast<uint8_t>(~kFlagRef);
    // Leaves enter the reference table once complete, containers before their children.
    const auto leaf = [&](ConstantPtr object) {
      if (object && flagged) refs_.push_back(object);
      return object;
    };
    switch (type) {
      case kTypeNull:
        return nullptr;  // only the caller knows whether NULL is allowed here
      case kTypeNone:
        return none_constant();
      case kTypeEllipsis:
        return ellipsis_constant();
      case kTypeStopIteration:
        return stop_iteration_constant();
      case kTypeFalse:
        return bool_constant(false);
      case kTypeTrue:
        return bool_constant(true);
      case kTypeInt:
        return leaf(read_int32_object());
      case kTypeInt64:
        return leaf(read_int64_object());
      case kTypeLong:
        return leaf(read_long_object());
      case kTypeFloat:
      case kTypeBinaryFloat:
        return leaf(read_float_object(type == kTypeBinaryFloat));
      case kTypeComplex:
      case kTypeBinaryComplex:
        return leaf(read_complex_object(type == kTypeBinaryComplex));
      case kTypeBytes:
        return leaf(read_bytes_object());
      case kTypeUnicode:
      case kTypeInterned:
        return leaf(read_utf8_object());
      case kTypeAscii:
      case kTypeAsciiInterned:
      case kTypeShortAscii:
      case kTypeShortAsciiInterned:
        return leaf(read_ascii_object(type == kTypeShortAscii || type == kTypeShortAsciiInterned));
      case kTypeTuple:
      case kTypeSmallTuple:
      case kTypeFrozenSet:
        return read_sequence_object(start, type, flagged);
      case kTypeCode:
        return read_code_object(start, flagged);
      case kTypeRef:
        return read_reference(start);
      case kTypeList:
      case kTypeDict:
      case kTypeSet: {
        const char* what = type == kTypeList ? "list" : type == kTypeDict ? "dict" : "set";
        fail(start, std::string(what) + " objects (type code " + describe_type_code(type) +
                        ") are not supported: they never occur in code objects");
        return nullptr;
      }
      case kTypeSlice:
        fail(start, "slice objects (type code ':') belong to marshal version 5 (Python 3.14+)");
        return nullptr;
      case kTypeUnknown:
        fail(start, "an unmarshallable object was written here (type code '?')");
        return nullptr;
      default:
        fail(start, "unknown type code " + describe_type_code(type));
        return nullptr;
    }
  }

  static std::shared_ptr<Constant> new_constant(Constant::Kind kind) {
    auto constant = std::make_shared<Constant>();
    constant->kind = kind;
    return constant;
  }

  ConstantPtr read_int32_object() {
    int32_t value = 0;
    if (!read_i32("an int", value)) return nullptr;
    if (value >= kFirstCachedInt && value <= kLastCachedInt) return small_int_constant(value);
    auto constant = new_constant(Constant::Kind::Int);
    constant->int_value = BigInt::from_int64(value);
    return constant;
  }

  ConstantPtr read_int64_object() {
    std::string_view bytes;
    if (!take(8, "a 64-bit int", bytes)) return nullptr;
    uint64_t bits = 0;
    for (int i = 7; i >= 0; --i) {
      bits = (bits << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    }
    int64_t value = 0;
    std::memcpy(&value, &bits, sizeof(value));
    auto constant = new_constant(Constant::Kind::Int);
    constant->int_value = BigInt::from_int64(value);
    return constant;
  }

  // Sign and count of base-2**15 digits in one int32, then the digits, least
  // significant first; the most significant digit must be non-zero.
  ConstantPtr read_long_object() {
    const size_t at = pos_;
    int32_t n = 0;
    if (!read_i32("the digit count of a long int", n)) return nullptr;
    if (n == std::numeric_limits<int32_t>::min()) {
      fail(at, "long int digit count out of range");
      return nullptr;
    }
    const bool negative = n < 0;
    size_t count = 0;
    if (!check_fits(at, "long int digit count", static_cast<size_t>(negative ? -n : n), 2, count)) {
      return nullptr;
    }
    std::vector<uint16_t> digits(count);
    for (size_t i = 0; i < count; ++i) {
      const size_t digit_at = pos_;
      std::string_view bytes;
      if (!take(2, "a long int digit", bytes)) return nullptr;
      const auto digit = static_cast<uint16_t>(static_cast<unsigned char>(bytes[0]) |
                                               (static_cast<unsigned char>(bytes[1]) << 8));
      if (digit >= 0x8000) {
        fail(digit_at, "long int digit " + std::to_string(digit) + " out of range (>= 2**15)");
        return nullptr;
      }
      if (i + 1 == count && digit == 0) {
        fail(digit_at, "unnormalized long int (most significant digit is 0)");
        return nullptr;
      }
      digits[i] = digit;
    }
    auto constant = new_constant(Constant::Kind::Int);
    constant->int_value = BigInt::from_digits15(negative, std::move(digits));
    return constant;
  }

  bool read_double(bool binary, double& value) {
    const size_t at = pos_;
    std::string_view bytes;
    if (binary) {
      if (!take(8, "a binary float", bytes)) return false;
      value = double_from_le_bytes(bytes);
      return true;
    }
    uint8_t length = 0;
    if (!read_u8("the length of a text float", length)) return false;
    if (!take(length, "a text float", bytes)) return false;
    if (!parse_float_text(bytes, value)) {
      return fail(at, "invalid float text \"" + std::string(bytes) + "\"");
    }
    return true;
  }

  ConstantPtr read_float_object(bool binary) {
    double value = 0.0;
    if (!read_double(binary, value)) return nullptr;
    auto constant = new_constant(Constant::Kind::Float);
    constant->float_value = value;
    return constant;
  }

  ConstantPtr read_complex_object(bool binary) {
    double real = 0.0;
    double imag = 0.0;
    if (!read_double(binary, real) || !read_double(binary, imag)) return nullptr;
    auto constant = new_constant(Constant::Kind::Complex);
    constant->complex_value = {real, imag};
    return constant;
  }

  ConstantPtr read_bytes_object() {
    size_t size = 0;
    std::string_view bytes;
    if (!read_size("bytes object size", 1, size) || !take(size, "a bytes object", bytes)) {
      return nullptr;
    }
    if (size == 0) return empty_constant(Constant::Kind::Bytes);
    auto constant = new_constant(Constant::Kind::Bytes);
    constant->bytes.assign(bytes);
    return constant;
  }

  ConstantPtr read_utf8_object() {
    size_t size = 0;
    std::string_view text;
    if (!read_size("string size", 1, size)) return nullptr;
    const size_t text_at = pos_;
    if (!take(size, "a string", text)) return nullptr;
    size_t bad_at = 0;
    if (!is_valid_utf8(text, bad_at)) {
      fail(text_at + bad_at, "invalid UTF-8 in a string");
      return nullptr;
    }
    if (size == 0) return empty_constant(Constant::Kind::Str);
    auto constant = new_constant(Constant::Kind::Str);
    constant->bytes.assign(text);
    return constant;
  }

  ConstantPtr read_ascii_object(bool short_form) {
    size_t size = 0;
    if (short_form) {
      uint8_t length = 0;
      if (!read_u8("the length of a short string", length)) return nullptr;
      size = length;
    } else if (!read_size("string size", 1, size)) {
      return nullptr;
    }
    std::string_view text;
    if (!take(size, "a string", text)) return nullptr;
    if (size == 0) return empty_constant(Constant::Kind::Str);
    auto constant = new_constant(Constant::Kind::Str);
    constant->bytes = latin1_to_utf8(text);
    return constant;
  }

  // Tuples and frozensets: a count, then the items.
  ConstantPtr read_sequence_object(size_t start, uint8_t type, bool flagged) {
    const bool is_set = type == kTypeFrozenSet;
    const char* what = is_set ? "frozenset size" : "tuple size";
    size_t size = 0;
    if (type == kTypeSmallTuple) {
      uint8_t count = 0;
      if (!read_u8(what, count) || !check_fits(start + 1, what, count, 1, size)) return nullptr;
    } else if (!read_size(what, 1, size)) {
      return nullptr;
    }
    const size_t slot = flagged ? reserve_ref() : 0;
    if (size == 0 && !is_set) {
      fill_ref(flagged, slot, empty_constant(Constant::Kind::Tuple));
      return empty_constant(Constant::Kind::Tuple);
    }
    auto constant = new_constant(is_set ? Constant::Kind::FrozenSet : Constant::Kind::Tuple);
    constant->items.reserve(size);
    for (size_t i = 0; i < size; ++i) {
      const size_t item_at = pos_;
      ConstantPtr item = read_object();
      if (error_) return nullptr;
      if (!item) {
        fail(item_at, std::string("NULL object in ") + (is_set ? "a frozenset" : "a tuple"));
        return nullptr;
      }
      constant->items.push_back(std::move(item));
    }
    fill_ref(flagged, slot, constant);
    return constant;
  }

  ConstantPtr read_reference(size_t start) {
    int32_t index = 0;
    if (!read_i32("a reference index", index)) return nullptr;
    if (index < 0 || static_cast<size_t>(index) >= refs_.size()) {
      fail(start, "invalid reference index " + std::to_string(index) + " (" +
                      std::to_string(refs_.size()) + " objects recorded so far)");
      return nullptr;
    }
    const ConstantPtr& target = refs_[static_cast<size_t>(index)];
    if (!target) {
      fail(start,
           "reference " + std::to_string(index) + " is to an object still being read (a cycle)");
      return nullptr;
    }
    return target;
  }

  bool charge_copy(size_t at, size_t bytes) {
    if (bytes > copy_budget_) {
      return fail(at,
                  "code objects copy more data than the input can justify (shared objects "
                  "referenced too often)");
    }
    copy_budget_ -= bytes;
    return true;
  }

  // One field of a code object: the object at the current position, of kind `kind`.
  ConstantPtr read_field(const char* field, Constant::Kind kind, size_t& at) {
    at = pos_;
    ConstantPtr object = read_object();
    if (error_) return nullptr;
    if (!object) {
      fail(at, std::string("code object field ") + field + " is NULL");
      return nullptr;
    }
    if (object->kind != kind) {
      fail(at, std::string("code object field ") + field + " must be " + kind_name(kind) +
                   ", not " + kind_name(object->kind));
      return nullptr;
    }
    return object;
  }

  bool read_string_field(const char* field, Constant::Kind kind, std::string& out) {
    size_t at = 0;
    ConstantPtr object = read_field(field, kind, at);
    if (!object || !charge_copy(at, object->bytes.size())) return false;
    out = object->bytes;
    return true;
  }

  bool read_names_field(const char* field, std::vector<std::string>& out) {
    size_t at = 0;
    ConstantPtr tuple = read_field(field, Constant::Kind::Tuple, at);
    if (!tuple) return false;
    out.reserve(tuple->items.size());
    for (const ConstantPtr& item : tuple->items) {
      if (item->kind != Constant::Kind::Str) {
        return fail(at, std::string("code object field ") + field + " must hold only str, not " +
                            kind_name(item->kind));
      }
      if (!charge_copy(at, sizeof(std::string) + item->bytes.size())) return false;
      out.push_back(item->bytes);
    }
    return true;
  }

  bool read_int_field(const char* field, int& value) {
    int32_t n = 0;
    if (!read_i32(field, n)) return false;
    value = n;
    return true;
  }

  // The fields in the order 3.11 to 3.13 write them (w_object's TYPE_CODE case).
  ConstantPtr read_code_object(size_t start, bool flagged) {
    if (!is_supported_version(options_.version)) {
      fail(start, "code objects of Python " + options_.version.to_string() +
                      " are not supported (dynvm reads 3.11, 3.12 and 3.13)");
      return nullptr;
    }
    const size_t slot = flagged ? reserve_ref() : 0;
    auto code = std::make_shared<RawCode>();
    code->version = options_.version;
    int flags = 0;
    if (!read_int_field("co_argcount", code->argcount) ||
        !read_int_field("co_posonlyargcount", code->posonlyargcount) ||
        !read_int_field("co_kwonlyargcount", code->kwonlyargcount) ||
        !read_int_field("co_stacksize", code->stacksize) || !read_int_field("co_flags", flags) ||
        !read_string_field("co_code", Constant::Kind::Bytes, code->code)) {
      return nullptr;
    }
    code->flags = static_cast<uint32_t>(flags);

    size_t consts_at = 0;
    ConstantPtr consts = read_field("co_consts", Constant::Kind::Tuple, consts_at);
    if (!consts || !charge_copy(consts_at, consts->items.size() * sizeof(ConstantPtr))) {
      return nullptr;
    }
    code->consts = consts->items;

    std::string kinds;
    if (!read_names_field("co_names", code->names) ||
        !read_names_field("co_localsplusnames", code->localsplusnames)) {
      return nullptr;
    }
    const size_t kinds_at = pos_;
    if (!read_string_field("co_localspluskinds", Constant::Kind::Bytes, kinds) ||
        !read_string_field("co_filename", Constant::Kind::Str, code->filename) ||
        !read_string_field("co_name", Constant::Kind::Str, code->name) ||
        !read_string_field("co_qualname", Constant::Kind::Str, code->qualname) ||
        !read_int_field("co_firstlineno", code->firstlineno) ||
        !read_string_field("co_linetable", Constant::Kind::Bytes, code->linetable) ||
        !read_string_field("co_exceptiontable", Constant::Kind::Bytes, code->exceptiontable)) {
      return nullptr;
    }
    code->localspluskinds.assign(kinds.begin(), kinds.end());
    if (!validate(start, kinds_at, *code)) return nullptr;

    auto constant = new_constant(Constant::Kind::Code);
    constant->code = std::move(code);
    fill_ref(flagged, slot, constant);
    return constant;
  }

  // The consistency checks CPython's _PyCode_Validate makes before building a code
  // object, so that later stages can rely on them.
  bool validate(size_t start, size_t kinds_at, const RawCode& code) {
    const std::string where = "code object " + code.qualname + ": ";
    if (code.argcount < 0 || code.posonlyargcount < 0 || code.kwonlyargcount < 0 ||
        code.posonlyargcount > code.argcount) {
      return fail(start, where + "invalid argument counts (argcount " +
                             std::to_string(code.argcount) + ", posonlyargcount " +
                             std::to_string(code.posonlyargcount) + ", kwonlyargcount " +
                             std::to_string(code.kwonlyargcount) + ")");
    }
    if (code.stacksize < 0) {
      return fail(start, where + "negative co_stacksize " + std::to_string(code.stacksize));
    }
    if (code.code.size() % 2 != 0) {
      return fail(start, where + "co_code has an odd number of bytes (" +
                             std::to_string(code.code.size()) + ")");
    }
    if (code.localspluskinds.size() != code.localsplusnames.size()) {
      return fail(kinds_at, where + "co_localspluskinds has " +
                                std::to_string(code.localspluskinds.size()) + " entries for " +
                                std::to_string(code.localsplusnames.size()) + " names");
    }
    int64_t locals = 0;
    for (const uint8_t kind : code.localspluskinds) {
      if (kind & kLocalKindLocal) ++locals;
    }
    const int64_t arguments = int64_t{code.argcount} + code.kwonlyargcount +
                              ((code.flags & kCoVarargs) ? 1 : 0) +
                              ((code.flags & kCoVarkeywords) ? 1 : 0);
    if (locals < arguments) {
      return fail(start, where + "co_varnames is too small: " + std::to_string(arguments) +
                             " arguments but " + std::to_string(locals) + " local names");
    }
    return true;
  }

  std::string_view data_;
  MarshalReadOptions options_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<ConstantPtr> refs_;  // empty pointer: reserved, still being read
  size_t copy_budget_ = 0;
  std::optional<Error> error_;
};

}  // namespace

Expected<ConstantPtr> read_marshal_object(std::string_view data,
                                          const MarshalReadOptions& options) {
  MarshalReader reader(data, options);
  return reader.read_top_level();
}

Expected<RawCodePtr> read_marshal_code(std::string_view data, const MarshalReadOptions& options) {
  Expected<ConstantPtr> object = read_marshal_object(data, options);
  if (!object) return object.error();
  if ((*object)->kind != Constant::Kind::Code) {
    return make_error("bad marshal data at offset " + std::to_string(options.offset_base) +
                      ": expected a code object, found " + kind_name((*object)->kind));
  }
  return (*object)->code;
}

}  // namespace dynvm::frontend
