// The primitive operator set fused groups are made of, listed once, and the metadata
// rules (shape, dtype, strides) of those operators.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// How a fusion kernel treats an operator.
enum class PrimitiveKind : uint8_t {
  Extern,     // not primitive: run through ATen (mm, convolution, ...)
  Pointwise,  // elementwise with broadcasting and type promotion
  Reduction,  // reduces given dimensions: sum.dim_IntList, amax, amin
  View,       // remaps indices of its input: view, permute, expand, slice, ...
  Window,     // each output element folds a window of input elements: max_pool2d
};

// The kind of `op` from its name alone: Extern for every operator not in the set.
PrimitiveKind primitive_kind(std::string_view op);
// The kind of a node: also Extern when the arguments leave the primitive set
// (aten::_to_copy changing device, layout or memory format, a `rounding_mode`).
PrimitiveKind primitive_kind(const Node& node);
std::string_view primitive_kind_name(PrimitiveKind kind);  // "pointwise", "extern", ...

// Every primitive operator, in the order of the list.
std::vector<std::string_view> primitive_ops();

// The metadata of the single output of a primitive operator applied to `args`: sizes
// from broadcasting, reducing or remapping, dtype from ATen's promotion rules, row-major
// strides for fresh tensors and the strides ATen gives views. An Error says why the
// arguments do not fit (unknown operator, missing metadata, sizes that do not broadcast).
Expected<TensorMeta> infer_primitive_meta(std::string_view op, const std::vector<Argument>& args,
                                          const std::vector<KeywordArgument>& kwargs = {});

// The window of a max_pool2d over the last two dimensions of a 3-d or 4-d floating-point
// tensor, with ATen's defaults filled in (stride = kernel, padding 0) and the output's
// sizes. Only dilation 1 is a primitive: the window of every output element is then a
// contiguous range that holds the input element nearest to each of its padded positions,
// so kernels read that element instead of -inf and the maximum is unchanged.
struct PoolWindow {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  std::vector<int64_t> out_sizes;
};
// nullopt when the arguments (self, kernel_size, stride, padding, dilation, ceil_mode)
// are not such a pool.
std::optional<PoolWindow> max_pool_window(const std::vector<Argument>& args,
                                          const std::vector<KeywordArgument>& kwargs = {});

// The strides a view with `sizes` of a tensor with `old_sizes`/`old_strides` gets
// (ATen's computeStride); nullopt when no view of that storage has those sizes.
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_sizes,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& sizes);

}  // namespace dynvm::graph
