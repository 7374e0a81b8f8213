// TensorMeta: what the graph knows about a tensor value without its data.
#pragma once

#include <cstdint>
#include <vector>

#include "dynvm/graph/device.h"
#include "dynvm/graph/dtype.h"

namespace dynvm::graph {

struct TensorMeta {
  DType dtype = DType::Float32;
  Device device;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // one per size, in elements
  bool requires_grad = false;

  // A tensor with row-major strides, as torch.empty(sizes) makes it.
  static TensorMeta contiguous(DType dtype, std::vector<int64_t> sizes, Device device = {},
                               bool requires_grad = false);

  size_t dim() const { return sizes.size(); }
  int64_t numel() const;
  // True when `strides` equal row_major_strides(sizes) exactly (the printer then omits them).
  bool has_row_major_strides() const;

  friend bool operator==(const TensorMeta& a, const TensorMeta& b) {
    return a.dtype == b.dtype && a.device == b.device && a.sizes == b.sizes &&
           a.strides == b.strides && a.requires_grad == b.requires_grad;
  }
  friend bool operator!=(const TensorMeta& a, const TensorMeta& b) { return !(a == b); }
};

// The strides torch gives a fresh contiguous tensor: each dimension's stride is the
// product of the later sizes, counting sizes of 0 as 1.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes);

}  // namespace dynvm::graph
