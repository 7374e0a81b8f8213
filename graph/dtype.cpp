// Names, sizes and categories of DType, generated from the DYNVM_DTYPES list.
#include "dynvm/graph/dtype.h"

namespace dynvm::graph {

std::string_view dtype_name(DType t) {
  switch (t) {
#define DYNVM_DTYPE_NAME(e, name, short_name, size) \
  case DType::e:                                    \
    return name;
    DYNVM_DTYPES(DYNVM_DTYPE_NAME)
#undef DYNVM_DTYPE_NAME
  }
  return "?";
}

std::string_view dtype_short_name(DType t) {
  switch (t) {
#define DYNVM_DTYPE_SHORT_NAME(e, name, short_name, size) \
  case DType::e:                                          \
    return short_name;
    DYNVM_DTYPES(DYNVM_DTYPE_SHORT_NAME)
#undef DYNVM_DTYPE_SHORT_NAME
  }
  return "?";
}

int dtype_itemsize(DType t) {
  switch (t) {
#define DYNVM_DTYPE_SIZE(e, name, short_name, size) \
  case DType::e:                                    \
    return size;
    DYNVM_DTYPES(DYNVM_DTYPE_SIZE)
#undef DYNVM_DTYPE_SIZE
  }
  return 0;
}

std::optional<DType> parse_dtype(std::string_view name) {
#define DYNVM_DTYPE_PARSE(e, n, short_name, size) \
  if (name == n) return DType::e;
  DYNVM_DTYPES(DYNVM_DTYPE_PARSE)
#undef DYNVM_DTYPE_PARSE
  return std::nullopt;
}

std::optional<DType> parse_dtype_short_name(std::string_view short_name) {
#define DYNVM_DTYPE_PARSE_SHORT(e, name, s, size) \
  if (short_name == s) return DType::e;
  DYNVM_DTYPES(DYNVM_DTYPE_PARSE_SHORT)
#undef DYNVM_DTYPE_PARSE_SHORT
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::Bool:
      return include_bool;
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
      return true;
    default:
      return false;
  }
}

}  // namespace dynvm::graph
