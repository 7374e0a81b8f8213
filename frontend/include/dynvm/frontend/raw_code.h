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

// A Python version this frontend understands, as (major, minor).
struct PythonVersion {
  int major = 3;
  int minor = 11;
  friend bool operator==(PythonVersion a, PythonVersion b) {
    return a.major == b.major && a.minor == b.minor;
  }
  friend bool operator!=(PythonVersion a, PythonVersion b) { return !(a == b); }
};

// An arbitrary-precision integer as CPython's marshal stores it: sign and
// magnitude in base-2**15 digits, least significant first. `small` is valid when
// `fits_int64`.
struct BigInt {
  bool negative = false;
  std::vector<uint16_t> digits15;
  bool fits_int64 = true;
  int64_t small = 0;
  std::string to_decimal() const;
};

// One constant of co_consts (or nested inside a tuple/frozenset constant).
struct Constant;
using ConstantPtr = std::shared_ptr<const Constant>;

struct Constant {
  enum class Kind : uint8_t {
    None, Ellipsis, StopIteration, Bool, Int, Float, Complex, Str, Bytes, Tuple,
    FrozenSet, Code
  };
  Kind kind = Kind::None;
  bool bool_value = false;
  BigInt int_value;
  double float_value = 0.0;
  std::complex<double> complex_value;
  std::string bytes;                    // Str (UTF-8) or Bytes
  std::vector<ConstantPtr> items;       // Tuple, FrozenSet
  std::shared_ptr<const RawCode> code;  // Code

  // The constant as Python's repr() prints it (used by dis listings).
  std::string repr() const;
};

// Kinds of a "localsplus" slot (CPython 3.11+ co_localspluskinds bits).
enum LocalKind : uint8_t {
  kLocalKindArgVar = 0x01,  // set with kLocalKindLocal for arguments (3.12 writes it)
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
  uint32_t flags = 0;                  // CO_* flags
  std::string code;                    // co_code: raw 16-bit code units, caches included
  std::vector<ConstantPtr> consts;
  std::vector<std::string> names;
  std::vector<std::string> localsplusnames;
  std::vector<uint8_t> localspluskinds;
  std::string filename;
  std::string name;
  std::string qualname;
  int firstlineno = 0;
  std::string linetable;               // co_linetable (3.11+ location table format)
  std::string exceptiontable;          // co_exceptiontable (varint entries)
};

}  // namespace dynvm::frontend
