// The channels_last pass: convolution graphs on CUDA run in the NHWC layout, which the
// GPU's convolution kernels (cuDNN, tensor cores) take natively, as Inductor's layout
// optimisation does. The values between convolutions keep that layout, so fused kernels
// read and write it and no convolution converts its input.
#pragma once

#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/graph/tensor_meta.h"

namespace dynvm::graph {

// When the pass changes a graph. DYNVM_CHANNELS_LAST: "auto" (the default: graphs with a
// 2-d convolution on CUDA), "on" (2-d convolutions on every device: tests use it on the
// CPU) or "off".
enum class ChannelsLastMode { Auto, On, Off };
ChannelsLastMode channels_last_mode();

// The pass, in the mode the environment gives. For every 2-d convolution of a
// floating-point 4-d input (on CUDA, in mode Auto):
// - an input not already channels-last is converted by
//   `aten::clone(x, memory_format=torch.channels_last)` (one per value, shared by every
//   convolution reading it), a weight the graph is given (a parameter) by
//   `dynvm::kept_clone` (op_properties.h: converted on the first call and kept while the
//   parameter is unchanged), and the convolution's result is recorded channels-last;
// - the layout follows the values computed from those results: a pointwise operator with
//   a full-size channels-last operand gives a channels-last result, pooling keeps it,
//   a view takes the strides ATen gives it, reductions read their input as it lies and
//   keep their recorded layout;
// - any other reader (an extern operator, a view ATen cannot take of the new layout, a
//   graph output) gets the value converted back to the layout the trace recorded, so
//   what leaves the graph is laid out as in eager.
// Convolutions and pooling pick their result's layout when they run
// (OpProperties::run_time_layout): executors copy a result into the recorded layout
// when the kernel chose another. Graphs without such a convolution are left unchanged.
void use_channels_last(Graph& graph);
// The same in a given mode; returns whether the graph changed.
bool use_channels_last(Graph& graph, ChannelsLastMode mode);

// The strides torch gives a fresh channels-last tensor of 4-d `sizes`.
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes);
// Whether `meta` is a dense channels-last 4-d tensor (strides of size-1 dims ignored, as
// torch's is_contiguous(memory_format=torch.channels_last) ignores them).
bool is_channels_last(const TensorMeta& meta);

}  // namespace dynvm::graph
