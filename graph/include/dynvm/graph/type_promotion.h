// Type promotion and broadcasting as ATen's TensorIterator applies them to pointwise ops.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dynvm/graph/dtype.h"

namespace dynvm::graph {

// torch.promote_types(a, b): the smallest type both convert to without losing their
// category (u8 with i8 gives i16, f16 with bf16 gives f32, f32 with c64 gives c64).
DType promote_types(DType a, DType b);

// One operand of a pointwise op, as torch.result_type sees it.
struct PromotionOperand {
  enum class Kind : uint8_t {
    Tensor,         // a tensor with at least one dimension
    ZeroDimTensor,  // a 0-d tensor: only its category counts against dimensioned tensors
    Scalar,         // a Python number: bool, int (i64) or float (f64, taken as float32)
  };
  Kind kind = Kind::Tensor;
  DType dtype = DType::Float32;
};

// torch.result_type over the operands (the default dtype is float32); nullopt when
// there are none.
std::optional<DType> result_type(const std::vector<PromotionOperand>& operands);

// The dtype the elementwise math runs in: f16 and bf16 compute in f32 (ATen's opmath).
DType computation_dtype(DType dtype);

// Broadcasts two size lists as ATen does; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);

}  // namespace dynvm::graph
