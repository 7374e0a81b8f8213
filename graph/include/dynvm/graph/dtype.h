// DType: the element types a graph value can carry, listed once.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dynvm::graph {

// X(enumerator, name as printed (and as torch spells it), size in bytes)
#define DYNVM_DTYPES(X)        \
  X(Bool, "bool", 1)           \
  X(UInt8, "uint8", 1)         \
  X(Int8, "int8", 1)           \
  X(Int16, "int16", 2)         \
  X(Int32, "int32", 4)         \
  X(Int64, "int64", 8)         \
  X(Float16, "float16", 2)     \
  X(BFloat16, "bfloat16", 2)   \
  X(Float32, "float32", 4)     \
  X(Float64, "float64", 8)     \
  X(Complex64, "complex64", 8) \
  X(Complex128, "complex128", 16)

enum class DType : uint8_t {
#define DYNVM_DTYPE_ENUM(e, name, size) e,
  DYNVM_DTYPES(DYNVM_DTYPE_ENUM)
#undef DYNVM_DTYPE_ENUM
};

std::string_view dtype_name(DType t);
int dtype_itemsize(DType t);
std::optional<DType> parse_dtype(std::string_view name);
bool is_floating(DType t);
bool is_integral(DType t, bool include_bool);

}  // namespace dynvm::graph
