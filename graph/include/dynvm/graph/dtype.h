// DType: the element types a graph value can carry, listed once.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dynvm::graph {

// X(enumerator, name as torch spells it, short name used in tensor types of the graph
//   text ("f32[2, 3] cpu"), size in bytes)
#define DYNVM_DTYPES(X)               \
  X(Bool, "bool", "bool", 1)          \
  X(UInt8, "uint8", "u8", 1)          \
  X(Int8, "int8", "i8", 1)            \
  X(Int16, "int16", "i16", 2)         \
  X(Int32, "int32", "i32", 4)         \
  X(Int64, "int64", "i64", 8)         \
  X(Float16, "float16", "f16", 2)     \
  X(BFloat16, "bfloat16", "bf16", 2)  \
  X(Float32, "float32", "f32", 4)     \
  X(Float64, "float64", "f64", 8)     \
  X(Complex64, "complex64", "c64", 8) \
  X(Complex128, "complex128", "c128", 16)

enum class DType : uint8_t {
#define DYNVM_DTYPE_ENUM(e, name, short_name, size) e,
  DYNVM_DTYPES(DYNVM_DTYPE_ENUM)
#undef DYNVM_DTYPE_ENUM
};

// "float32", as in torch.float32.
std::string_view dtype_name(DType t);
// "f32", as in the tensor types of the graph text.
std::string_view dtype_short_name(DType t);
int dtype_itemsize(DType t);
std::optional<DType> parse_dtype(std::string_view name);
std::optional<DType> parse_dtype_short_name(std::string_view short_name);
bool is_floating(DType t);
bool is_integral(DType t, bool include_bool);

}  // namespace dynvm::graph
