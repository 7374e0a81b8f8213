// RawCode: a code object's fields exactly as CPython stores them, before decoding.
//
// Both sources of code produce this: the marshal reader (bytes, .pyc files) and the
// live adapter (a PyCodeObject*). The decoder turns it into CodeInfo. Nothing here
// needs libpython.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace dynvm::frontend {

struct RawCode;
using RawCodePtr = std::shared_ptr<const RawCode>;

// A Python version this frontend understands, as (major, minor).
struct PythonVersion {
  int major = 3;
  int minor = 11;
  friend bool operator==(PythonVersion a, PythonVersion b) {
    return a.major == b.major && a.minor == b.minor;
  }
  friend bool operator!=(PythonVersion a, PythonVersion b) { return !(a == b); }
  // "3.11"
  std::string to_string() const;
};

// An arbitrary-precision integer as CPython's marshal stores it: sign and
// magnitude in base-2**15 digits, least significant first. `small` is valid when
// `fits_int64`.
//
// Values built by from_int64/from_digits15 (which the marshal reader and the live
// adapter use) always carry the normalized magnitude in `digits15` (no most
// significant zero digits, empty for zero), whether or not they fit in int64.
struct BigInt {
  bool negative = false;
  std::vector<uint16_t> digits15;
  bool fits_int64 = true;
  int64_t small = 0;

  static BigInt from_int64(int64_t value);
  // `digits` least significant first, each below 2**15; leading zeros are dropped.
  static BigInt from_digits15(bool negative, std::vector<uint16_t> digits);

  // Exact decimal form, any size ("-123"). Quadratic in the number of digits.
  std::string to_decimal() const;
};

// One constant of co_consts (or nested inside a tuple/frozenset constant).
//
// Constants are immutable and may be shared: marshal back-references and CPython's
// constant deduplication make the constants of a code object a DAG, not a tree.
struct Constant;
using ConstantPtr = std::shared_ptr<const Constant>;

struct Constant {
  enum class Kind : uint8_t {
    None,
    Ellipsis,
    StopIteration,  // the class object StopIteration (marshal type 'S')
    Bool,
    Int,
    Float,
    Complex,
    Str,
    Bytes,
    Tuple,
    FrozenSet,
    Code
  };
  Kind kind = Kind::None;
  bool bool_value = false;
  BigInt int_value;
  double float_value = 0.0;
  std::complex<double> complex_value;
  // Str: UTF-8, where lone surrogates (U+D800..U+DFFF) are encoded as three-byte
  // sequences like CPython's "surrogatepass" error handler does. Bytes: raw bytes.
  std::string bytes;
  // Tuple, FrozenSet. A frozenset keeps the order in which its source listed the
  // elements: marshal order (CPython 3.11+ sorts them by each element's own marshal
  // bytes) or the live set's iteration order. CPython's order after loading depends on
  // hashing, so a dis listing of a loaded .pyc may print another order.
  std::vector<ConstantPtr> items;
  std::shared_ptr<const RawCode> code;  // Code

  // The constant as Python 3.11's repr() prints it (used by dis listings). A code
  // object prints with the stable fake address kCodeReprAddress instead of its
  // memory address; compare dis output after normalising "at 0x...". Like Python's,
  // the text prints shared items once per use, so adversarial marshal data can make it
  // exponentially long; ints of any size print exactly (CPython 3.11 refuses above
  // 4300 digits).
  std::string repr() const;
};

// What Constant::repr() prints as the address of a code object.
inline constexpr const char* kCodeReprAddress = "0x0";

// Kinds of a "localsplus" slot (CPython 3.11+ co_localspluskinds bits; pycore_code.h's
// CO_FAST_*). Arguments are plain kLocalKindLocal in 3.11 and 3.12.
enum LocalKind : uint8_t {
  kLocalKindArgVar = 0x01,  // no CPython 3.11/3.12 bit: neither writes it
  kLocalKindHidden = 0x10,  // 3.12: hidden locals of inlined comprehensions
  kLocalKindLocal = 0x20,
  kLocalKindCell = 0x40,
  kLocalKindFree = 0x80,
};

struct RawCode {
  PythonVersion version;
  int argcount = 0;
  int posonlyargcount = 0;
  int kwonlyargcount = 0;
  int stacksize = 0;
  uint32_t flags = 0;  // CO_* flags
  std::string code;    // co_code: raw 16-bit code units, caches included (zeroed)
  std::vector<ConstantPtr> consts;
  std::vector<std::string> names;  // strings here are UTF-8 as in Constant::bytes
  std::vector<std::string> localsplusnames;
  std::vector<uint8_t> localspluskinds;
  std::string filename;
  std::string name;
  std::string qualname;
  int firstlineno = 0;
  std::string linetable;       // co_linetable (3.11+ location table format)
  std::string exceptiontable;  // co_exceptiontable (varint entries)
};

}  // namespace dynvm::frontend
