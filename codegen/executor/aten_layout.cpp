#include "executor/aten_layout.h"

#include <ATen/ops/empty_strided.h>

#include "executor/aten_dtype.h"

namespace dynvm::codegen {

bool has_layout(const at::Tensor& t, const graph::TensorMeta& meta) {
  if (!t.defined() || t.scalar_type() != to_scalar_type(meta.dtype) ||
      t.dim() != static_cast<int64_t>(meta.dim())) {
    return false;
  }
  for (size_t d = 0; d < meta.dim(); ++d) {
    auto dim = static_cast<int64_t>(d);
    if (t.size(dim) != meta.sizes[d]) return false;
    if (meta.sizes[d] > 1 && t.stride(dim) != meta.strides[d]) return false;
  }
  return true;
}

at::Tensor in_layout(const at::Tensor& t, const graph::TensorMeta& meta) {
  if (!t.defined() || has_layout(t, meta) || t.scalar_type() != to_scalar_type(meta.dtype) ||
      t.sizes() != c10::IntArrayRef(meta.sizes)) {
    return t;
  }
  return at::empty_strided(meta.sizes, meta.strides, t.options()).copy_(t);
}

}  // namespace dynvm::codegen
