// aten_layout: whether an ATen tensor is laid out as a graph TensorMeta says, as a
// compiled kernel requires of its arguments. Private to codegen/.
#pragma once

#include <ATen/core/Tensor.h>

#include "dynvm/graph/tensor_meta.h"

namespace dynvm::codegen {

// Defined, of `meta`'s dtype, rank and sizes, with `meta`'s strides on every dimension
// longer than 1 (the device is the caller's to check).
bool has_layout(const at::Tensor& t, const graph::TensorMeta& meta);

// `t`, or, when it has `meta`'s dtype and sizes but other strides (on a dimension longer
// than 1), a copy of it laid out as `meta` says: how a result whose layout the kernel
// picked (convolution, a group run through ATen) reaches kernels compiled for the layout
// the graph records.
at::Tensor in_layout(const at::Tensor& t, const graph::TensorMeta& meta);

}  // namespace dynvm::codegen
