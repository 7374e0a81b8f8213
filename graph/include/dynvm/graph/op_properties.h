// What the graph may assume about an operator from its name alone: whether it writes
// its inputs, draws random numbers, or returns a view of an input.
//
// Rules (docs/graph_ir.md has the full list): a base name ending in one '_' is in-place
// ("aten::add_.Tensor"); an overload "out", "*_out", "out_*", "Out*", "grad_input" or
// "output" is an out variant; everything else comes from one table in op_properties.cpp.
// Operators outside the aten and prims namespaces are opaque and assumed to do anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dynvm::graph {

// dynvm's grad-mode switch, `dynvm::set_grad_enabled(bool)`: no inputs or outputs; the
// nodes after it run with at::GradMode set to its argument (the trace records one where
// the program entered or left no_grad / enable_grad).
inline constexpr std::string_view kSetGradEnabledOp = "dynvm::set_grad_enabled";

// `dynvm::kept_clone(x, memory_format=...)`: aten::clone of a graph input, kept between
// calls while the input is the same tensor at the same version, so that a convolution's
// weight is converted to channels-last once rather than on every call
// (graph/channels_last.h). Its result is read, never written or returned.
inline constexpr std::string_view kKeptCloneOp = "dynvm::kept_clone";

// "aten::add_.Tensor" → {"aten", "add_", "Tensor"}; the overload is empty when absent.
struct OpName {
  std::string_view ns;
  std::string_view base;
  std::string_view overload;
};

// Splits ns::base[.overload]; nullopt when `op` is not of that shape.
std::optional<OpName> parse_op_name(std::string_view op);

// How an operator's outputs may share storage with its inputs.
enum class AliasKind : uint8_t {
  None,      // outputs are fresh tensors
  View,      // outputs are views of the (first) tensor input: aten::view, aten::t
  MayAlias,  // outputs may be the input or a view of it: aten::reshape, aten::contiguous
};

struct OpProperties {
  bool known_namespace = true;  // aten:: or prims::
  bool in_place = false;        // writes its first argument and returns it
  bool out_variant = false;     // writes the tensors passed as keyword arguments
  bool mutates = false;         // writes some input (in place, out variant, or known to)
  bool random = false;          // draws from the random number generator
  bool effectful = false;       // observable without its outputs (asserts, stream events)
  // The result's strides depend on the kernel ATen picks when it runs, not only on the
  // inputs' (scaled_dot_product_attention, convolution, pooling): executors deliver it in
  // the layout the graph records.
  bool run_time_layout = false;
  AliasKind alias = AliasKind::None;

  // Must run even when none of its outputs is used.
  bool has_side_effects() const { return mutates || random || effectful; }
  // Safe to drop, duplicate or merge: same inputs, same result, nothing else touched.
  bool is_pure() const { return !has_side_effects() && known_namespace; }
  bool is_view() const { return alias == AliasKind::View; }
  bool may_alias_input() const { return alias != AliasKind::None; }
};

OpProperties op_properties(std::string_view op);

class Argument;
class Node;

// Whether `node` may write a tensor it is given, from its name and arguments: an operator
// that mutates by its properties, except batch norm (native, cuDNN, MIOpen) outside
// training or without running statistics, which writes nothing; an opaque operator that
// is given a tensor.
bool node_may_write(const Node& node);

// The namespace of the operators the VM records for torch.autograd.Function applications
// where a gradient flows (vm/calls.cpp, autograd_function_operator): the VM ran each
// Function's forward first and recorded it only when that forward wrote none of its
// arguments, drew no random numbers, had no other side effect and returned no argument
// or view of one. So such an operator writes nothing, and running it again (a recomputing
// backward) gives the same values; what else it is stays opaque (it may alias).
inline constexpr std::string_view kAutogradFunctionNamespace = "dynvm_fn";

// The dropout_p argument of an attention kernel (scaled_dot_product_attention and the
// CPU's flash, CUDA's flash, memory-efficient and cuDNN kernels), by name or position;
// nullptr for other operators and where none is given.
const Argument* attention_dropout(const Node& node);

// Whether `node` draws random numbers: an operator that is random by its properties, or
// an attention kernel given a dropout probability other than zero (so two such calls
// differ, and a recomputation or a replayed CUDA graph would draw another mask).
bool node_draws_random(const Node& node);

}  // namespace dynvm::graph
