// aten_dtype: graph::DType -> c10::ScalarType.
#include "executor/aten_dtype.h"

namespace dynvm::codegen {

c10::ScalarType to_scalar_type(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::Bool:
      return c10::ScalarType::Bool;
    case graph::DType::UInt8:
      return c10::ScalarType::Byte;
    case graph::DType::Int8:
      return c10::ScalarType::Char;
    case graph::DType::Int16:
      return c10::ScalarType::Short;
    case graph::DType::Int32:
      return c10::ScalarType::Int;
    case graph::DType::Int64:
      return c10::ScalarType::Long;
    case graph::DType::Float16:
      return c10::ScalarType::Half;
    case graph::DType::BFloat16:
      return c10::ScalarType::BFloat16;
    case graph::DType::Float32:
      return c10::ScalarType::Float;
    case graph::DType::Float64:
      return c10::ScalarType::Double;
    case graph::DType::Complex64:
      return c10::ScalarType::ComplexFloat;
    case graph::DType::Complex128:
      return c10::ScalarType::ComplexDouble;
  }
  return c10::ScalarType::Undefined;
}

}  // namespace dynvm::codegen
