// Construction and stride helpers of TensorMeta.
#include "dynvm/graph/tensor_meta.h"

#include <utility>

namespace dynvm::graph {

TensorMeta TensorMeta::contiguous(DType dtype, std::vector<int64_t> sizes, Device device,
                                  bool requires_grad) {
  TensorMeta meta;
  meta.dtype = dtype;
  meta.device = device;
  meta.strides = row_major_strides(sizes);
  meta.sizes = std::move(sizes);
  meta.requires_grad = requires_grad;
  return meta;
}

// Products wrap instead of overflowing: sizes come from parsed text, and a nonsense
// size must not be undefined behaviour (the verifier reports it).
int64_t TensorMeta::numel() const {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return static_cast<int64_t>(n);
}

bool TensorMeta::has_row_major_strides() const {
  if (is_symbolic()) return sym_strides == row_major_sym_strides(sym_sizes);
  return strides == row_major_strides(sizes);
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  uint64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = static_cast<int64_t>(stride);
    stride *= sizes[i] > 1 ? static_cast<uint64_t>(sizes[i]) : 1;
  }
  return strides;
}

std::vector<SymExpr> row_major_sym_strides(const std::vector<SymExpr>& sizes) {
  std::vector<SymExpr> strides(sizes.size());
  SymExpr stride = SymExpr::constant(1);
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    std::optional<int64_t> fixed = sizes[i].constant_value();
    if (!fixed || *fixed > 1) stride = stride * sizes[i];
  }
  return strides;
}

}  // namespace dynvm::graph
