// aten_dtype: the graph IR's dtypes as ATen's scalar types. Private to codegen/.
#pragma once

#include <c10/core/ScalarType.h>

#include "dynvm/graph/dtype.h"

namespace dynvm::codegen {

c10::ScalarType to_scalar_type(graph::DType dtype);

}  // namespace dynvm::codegen
