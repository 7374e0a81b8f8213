// TensorMeta: what the graph knows about a tensor value without its data.
#pragma once

#include <cstdint>
#include <vector>

#include "dynvm/graph/device.h"
#include "dynvm/graph/dtype.h"
#include "dynvm/graph/sym_expr.h"

namespace dynvm::graph {

struct TensorMeta {
  DType dtype = DType::Float32;
  Device device;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // one per size, in elements
  bool requires_grad = false;
  // Dynamic shapes: empty for a tensor of fixed sizes; otherwise one expression per size
  // and per stride over the graph's symbols (Graph::symbols), `sizes` and `strides` then
  // holding their values at the symbols' hints (what the trace saw).
  std::vector<SymExpr> sym_sizes;
  std::vector<SymExpr> sym_strides;

  // A tensor with row-major strides, as torch.empty(sizes) makes it.
  static TensorMeta contiguous(DType dtype, std::vector<int64_t> sizes, Device device = {},
                               bool requires_grad = false);

  size_t dim() const { return sizes.size(); }
  int64_t numel() const;
  // True when `strides` equal row_major_strides(sizes) exactly (the printer then omits them).
  bool has_row_major_strides() const;
  bool is_symbolic() const { return !sym_sizes.empty(); }

  friend bool operator==(const TensorMeta& a, const TensorMeta& b) {
    return a.dtype == b.dtype && a.device == b.device && a.sizes == b.sizes &&
           a.strides == b.strides && a.requires_grad == b.requires_grad &&
           a.sym_sizes == b.sym_sizes && a.sym_strides == b.sym_strides;
  }
  friend bool operator!=(const TensorMeta& a, const TensorMeta& b) { return !(a == b); }
};

// The strides torch gives a fresh contiguous tensor: each dimension's stride is the
// product of the later sizes, counting sizes of 0 as 1.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes);
// The same over symbolic sizes: a size that is a constant 0 or 1 counts as 1, a symbolic
// one as itself (a symbol's value is at least 2: sizes 0 and 1 are never symbolic).
std::vector<SymExpr> row_major_sym_strides(const std::vector<SymExpr>& sizes);

}  // namespace dynvm::graph
