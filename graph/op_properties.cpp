// The operator table and the naming rules behind op_properties().
#include "dynvm/graph/op_properties.h"

#include "dynvm/graph/node.h"
#include "dynvm/graph/value.h"

#include <string>
#include <unordered_map>

namespace dynvm::graph {

namespace {

enum OpFlag : uint8_t {
  kRandom = 1 << 0,
  kMutates = 1 << 1,
  kEffectful = 1 << 2,
  kView = 1 << 3,
  kMayAlias = 1 << 4,
  kOutVariant = 1 << 5,
  kInPlace = 1 << 6,
  kRunTimeLayout = 1 << 7,
};

// X(operator, flags). An entry without an overload covers every overload of that base
// name; one with an overload covers that overload only. Only what the naming rules
// (in-place '_' suffix, out-variant overload names) do not already say is listed.
// clang-format off
#define DYNVM_OP_TABLE(X)                                                              \
  /* Random: draw from the generator, so two calls differ and a dead call still */     \
  /* advances its state. */                                                            \
  X("aten::dropout", kRandom)                                                          \
  X("aten::feature_dropout", kRandom)                                                  \
  X("aten::alpha_dropout", kRandom)                                                    \
  X("aten::feature_alpha_dropout", kRandom)                                            \
  X("aten::native_dropout", kRandom)                                                   \
  X("aten::_fused_dropout", kRandom)                                                   \
  X("aten::bernoulli", kRandom)                                                        \
  X("aten::bernoulli_", kRandom)                                                       \
  X("aten::rand", kRandom)                                                             \
  X("aten::rand_like", kRandom)                                                        \
  X("aten::randn", kRandom)                                                            \
  X("aten::randn_like", kRandom)                                                       \
  X("aten::randint", kRandom)                                                          \
  X("aten::randint_like", kRandom)                                                     \
  X("aten::randperm", kRandom)                                                         \
  X("aten::random_", kRandom)                                                          \
  X("aten::normal", kRandom)                                                           \
  X("aten::normal_", kRandom)                                                          \
  X("aten::uniform", kRandom)                                                          \
  X("aten::uniform_", kRandom)                                                         \
  X("aten::exponential", kRandom)                                                      \
  X("aten::exponential_", kRandom)                                                     \
  X("aten::geometric", kRandom)                                                        \
  X("aten::geometric_", kRandom)                                                       \
  X("aten::cauchy", kRandom)                                                           \
  X("aten::cauchy_", kRandom)                                                          \
  X("aten::log_normal", kRandom)                                                       \
  X("aten::log_normal_", kRandom)                                                      \
  X("aten::multinomial", kRandom)                                                      \
  X("aten::poisson", kRandom)                                                          \
  X("aten::binomial", kRandom)                                                         \
  X("aten::_standard_gamma", kRandom)                                                  \
  X("aten::_sample_dirichlet", kRandom)                                                \
  X("aten::rrelu", kRandom)                                                            \
  X("aten::rrelu_", kRandom)                                                           \
  X("aten::rrelu_with_noise_", kRandom)                                                \
  X("aten::rrelu_with_noise", kRandom | kMutates)                                      \
  /* Attention: draws when dropout_p > 0 (the graph cannot tell from the name), and */ \
  /* the kernel ATen picks at run time (flash, memory-efficient, math) decides the */  \
  /* result's strides. */                                                               \
  X("aten::scaled_dot_product_attention", kRandom | kRunTimeLayout)                    \
  /* Attention backwards (graph/autodiff.cpp) lay their gradients out as their */      \
  /* kernels pick (the CPU's flash: [batch, length, heads, dim]), not as the operands. */ \
  X("aten::_scaled_dot_product_flash_attention_for_cpu_backward", kRunTimeLayout)      \
  X("aten::_scaled_dot_product_efficient_attention_backward", kRunTimeLayout)          \
  X("aten::_scaled_dot_product_flash_attention_backward", kRunTimeLayout)              \
  X("aten::_scaled_dot_product_cudnn_attention_backward", kRunTimeLayout)              \
  /* Convolution and pooling: the result's memory format follows the input's suggested */ \
  /* one and the backend chosen when they run (graph/channels_last.h). */               \
  X("aten::convolution", kRunTimeLayout)                                               \
  X("aten::conv2d", kRunTimeLayout)                                                    \
  X("aten::max_pool2d", kRunTimeLayout)                                                \
  X("aten::max_pool2d_with_indices", kRunTimeLayout)                                   \
  X("aten::avg_pool2d", kRunTimeLayout)                                                \
  X("aten::adaptive_avg_pool2d", kRunTimeLayout)                                       \
  X("aten::_adaptive_avg_pool2d", kRunTimeLayout)                                      \
  X("aten::adaptive_max_pool2d", kRunTimeLayout)                                       \
  /* Mutating without the naming rules showing it: running statistics, observers. */   \
  X("aten::batch_norm", kMutates)                                                      \
  X("aten::native_batch_norm", kMutates)                                               \
  X("aten::_native_batch_norm_legit", kMutates)                                        \
  X("aten::_batch_norm_impl_index", kMutates)                                          \
  X("aten::_batch_norm_with_update", kMutates)                                         \
  X("aten::cudnn_batch_norm", kMutates)                                                \
  X("aten::miopen_batch_norm", kMutates)                                               \
  X("aten::instance_norm", kMutates)                                                   \
  X("aten::set_data", kMutates)                                                        \
  X("aten::_cummax_helper", kMutates)                                                  \
  X("aten::_cummin_helper", kMutates)                                                  \
  X("aten::_fused_moving_avg_obs_fq_helper", kMutates)                                 \
  X("aten::fused_moving_avg_obs_fake_quant", kMutates)                                 \
  /* In-place dunders: the '_' rule skips __x__ names. */                              \
  X("aten::__iand__", kInPlace)                                                        \
  X("aten::__ior__", kInPlace)                                                         \
  X("aten::__ixor__", kInPlace)                                                        \
  X("aten::__ilshift__", kInPlace)                                                     \
  X("aten::__irshift__", kInPlace)                                                     \
  /* Out variants whose overload names do not say "out". */                            \
  X("aten::max.dim_max", kOutVariant)                                                  \
  X("aten::max.names_dim_max", kOutVariant)                                            \
  X("aten::min.dim_min", kOutVariant)                                                  \
  X("aten::min.names_dim_min", kOutVariant)                                            \
  X("aten::kthvalue.values", kOutVariant)                                              \
  X("aten::mode.values", kOutVariant)                                                  \
  X("aten::median.dim_values", kOutVariant)                                            \
  X("aten::median.names_dim_values", kOutVariant)                                      \
  X("aten::nanmedian.dim_values", kOutVariant)                                         \
  X("aten::nanmedian.names_dim_values", kOutVariant)                                   \
  X("aten::sort.values", kOutVariant)                                                  \
  X("aten::sort.values_stable", kOutVariant)                                           \
  X("aten::sort.dimname_values", kOutVariant)                                          \
  X("aten::sort.dimname_values_stable", kOutVariant)                                   \
  X("aten::topk.values", kOutVariant)                                                  \
  X("aten::qr.Q", kOutVariant)                                                         \
  X("aten::svd.U", kOutVariant)                                                        \
  X("aten::linalg_svd.U", kOutVariant)                                                 \
  X("aten::_linalg_svd.U", kOutVariant)                                                \
  X("aten::geqrf.a", kOutVariant)                                                      \
  X("aten::symeig.e", kOutVariant)                                                     \
  X("aten::triangular_solve.X", kOutVariant)                                           \
  X("aten::linalg_cholesky_ex.L", kOutVariant)                                         \
  X("aten::linalg_eigh.eigvals", kOutVariant)                                          \
  X("aten::_linalg_eigh.eigenvalues", kOutVariant)                                     \
  X("aten::linalg_inv_ex.inverse", kOutVariant)                                        \
  X("aten::_linalg_det.result", kOutVariant)                                           \
  X("aten::_linalg_slogdet.sign", kOutVariant)                                         \
  X("aten::_linalg_solve_ex.result", kOutVariant)                                      \
  /* Effectful: must run although nothing reads their outputs. */                      \
  X("aten::_assert_async", kEffectful)                                                 \
  X("aten::_assert_scalar", kEffectful)                                                \
  X("aten::_assert_tensor_metadata", kEffectful)                                       \
  X("aten::_functional_assert_async", kEffectful)                                      \
  X("aten::_functional_assert_scalar", kEffectful)                                     \
  X("aten::sym_constrain_range", kEffectful)                                           \
  X("aten::sym_constrain_range_for_size", kEffectful)                                  \
  X("aten::_functional_sym_constrain_range", kEffectful)                               \
  X("aten::_linalg_check_errors", kEffectful)                                          \
  X("aten::record_stream", kEffectful)                                                 \
  X("aten::retain_grad", kEffectful)                                                   \
  /* Views: the output always shares the first tensor input's storage. */              \
  X("aten::view", kView)                                                               \
  X("aten::view_as", kView)                                                            \
  X("aten::_unsafe_view", kView)                                                       \
  X("aten::_reshape_alias", kView)                                                     \
  X("aten::as_strided", kView)                                                         \
  X("aten::alias", kView)                                                              \
  X("aten::detach", kView)                                                             \
  X("aten::lift_fresh", kView)                                                         \
  X("aten::t", kView)                                                                  \
  X("aten::numpy_T", kView)                                                            \
  X("aten::T", kView)                                                                  \
  X("aten::mT", kView)                                                                 \
  X("aten::H", kView)                                                                  \
  X("aten::mH", kView)                                                                 \
  X("aten::adjoint", kView)                                                            \
  X("aten::matrix_H", kView)                                                           \
  X("aten::transpose", kView)                                                          \
  X("aten::swapaxes", kView)                                                           \
  X("aten::swapdims", kView)                                                           \
  X("aten::permute", kView)                                                            \
  X("aten::movedim", kView)                                                            \
  X("aten::moveaxis", kView)                                                           \
  X("aten::expand", kView)                                                             \
  X("aten::expand_as", kView)                                                          \
  X("aten::broadcast_to", kView)                                                       \
  X("aten::broadcast_tensors", kView)                                                  \
  X("aten::slice", kView)                                                              \
  X("aten::select", kView)                                                             \
  X("aten::narrow", kView)                                                             \
  X("aten::unsqueeze", kView)                                                          \
  X("aten::squeeze", kView)                                                            \
  X("aten::diagonal", kView)                                                           \
  X("aten::unfold", kView)                                                             \
  X("aten::unflatten", kView)                                                          \
  X("aten::unbind", kView)                                                             \
  X("aten::split", kView)                                                              \
  X("aten::split_with_sizes", kView)                                                   \
  X("aten::unsafe_split", kView)                                                       \
  X("aten::unsafe_split_with_sizes", kView)                                            \
  X("aten::tensor_split", kView)                                                       \
  X("aten::hsplit", kView)                                                             \
  X("aten::vsplit", kView)                                                             \
  X("aten::dsplit", kView)                                                             \
  X("aten::chunk", kView)                                                              \
  X("aten::unsafe_chunk", kView)                                                       \
  X("aten::view_as_real", kView)                                                       \
  X("aten::view_as_complex", kView)                                                    \
  X("aten::real", kView)                                                               \
  X("aten::imag", kView)                                                               \
  X("aten::_conj", kView)                                                              \
  X("aten::_neg_view", kView)                                                          \
  X("aten::indices", kView)                                                            \
  X("aten::values", kView)                                                             \
  X("aten::_indices", kView)                                                           \
  X("aten::_values", kView)                                                            \
  X("aten::crow_indices", kView)                                                       \
  X("aten::col_indices", kView)                                                        \
  X("aten::ccol_indices", kView)                                                       \
  X("aten::row_indices", kView)                                                        \
  X("aten::linalg_diagonal", kView)                                                    \
  X("aten::slice_inverse", kView)                                                      \
  X("aten::align_to", kView)                                                           \
  X("aten::rename", kView)                                                             \
  X("aten::refine_names", kView)                                                       \
  X("aten::_fw_primal", kView)                                                         \
  X("aten::_make_dual", kView)                                                         \
  X("aten::_unpack_dual", kView)                                                       \
  X("aten::_sparse_broadcast_to", kView)                                               \
  X("aten::_nested_get_values", kView)                                                 \
  X("aten::_nested_view_from_buffer", kView)                                           \
  X("aten::_nested_view_from_jagged", kView)                                           \
  /* May alias: return the input itself or a view when they can, a copy otherwise. */  \
  X("aten::reshape", kMayAlias)                                                        \
  X("aten::reshape_as", kMayAlias)                                                     \
  X("aten::flatten", kMayAlias)                                                        \
  X("aten::ravel", kMayAlias)                                                          \
  X("aten::contiguous", kMayAlias)                                                     \
  X("aten::to", kMayAlias)                                                             \
  X("aten::type_as", kMayAlias)                                                        \
  X("aten::conj", kMayAlias)                                                           \
  X("aten::resolve_conj", kMayAlias)                                                   \
  X("aten::resolve_neg", kMayAlias)                                                    \
  X("aten::positive", kMayAlias)                                                       \
  X("aten::atleast_1d", kMayAlias)                                                     \
  X("aten::atleast_2d", kMayAlias)                                                     \
  X("aten::atleast_3d", kMayAlias)                                                     \
  X("aten::coalesce", kMayAlias)                                                       \
  X("aten::_autocast_to_reduced_precision", kMayAlias)                                 \
  X("aten::_autocast_to_full_precision", kMayAlias)                                    \
  X("aten::pin_memory", kMayAlias)                                                     \
  X("aten::_grad_sum_to_size", kMayAlias)
// clang-format on

uint8_t table_flags(std::string_view key) {
  // Keyed by string, looked up only (never iterated), so its order cannot leak out.
  static const std::unordered_map<std::string_view, uint8_t> kTable = {
#define DYNVM_OP_TABLE_ENTRY(op, flags) {op, static_cast<uint8_t>(flags)},
      DYNVM_OP_TABLE(DYNVM_OP_TABLE_ENTRY)
#undef DYNVM_OP_TABLE_ENTRY
  };
  auto it = kTable.find(key);
  return it == kTable.end() ? 0 : it->second;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_name(std::string_view s, bool may_start_with_digit) {
  if (s.empty()) return false;
  if (!may_start_with_digit && s.front() >= '0' && s.front() <= '9') return false;
  for (char c : s) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

}  // namespace

std::optional<OpName> parse_op_name(std::string_view op) {
  size_t colons = op.find("::");
  if (colons == std::string_view::npos) return std::nullopt;
  OpName name;
  name.ns = op.substr(0, colons);
  std::string_view rest = op.substr(colons + 2);
  size_t dot = rest.find('.');
  name.base = rest.substr(0, dot);
  if (dot != std::string_view::npos) {
    name.overload = rest.substr(dot + 1);
    if (!is_name(name.overload, true)) return std::nullopt;
  }
  if (!is_name(name.ns, false) || !is_name(name.base, false)) return std::nullopt;
  return name;
}

OpProperties op_properties(std::string_view op) {
  OpProperties props;
  std::optional<OpName> name = parse_op_name(op);
  if (!name || (name->ns != "aten" && name->ns != "prims")) {
    // Custom or malformed operators: nothing is known, so assume everything.
    props.known_namespace = false;
    props.mutates = true;
    props.effectful = true;
    props.alias = AliasKind::MayAlias;
    return props;
  }
  std::string base_key = std::string(name->ns) + "::" + std::string(name->base);
  uint8_t flags = table_flags(base_key);
  if (!name->overload.empty()) flags |= table_flags(std::string(op));

  bool dunder = starts_with(name->base, "__") && ends_with(name->base, "__");
  props.in_place = (ends_with(name->base, "_") && !dunder) || (flags & kInPlace) != 0;
  std::string_view overload = name->overload;
  props.out_variant = overload == "out" || overload == "grad_input" || overload == "output" ||
                      ends_with(overload, "_out") || starts_with(overload, "out_") ||
                      starts_with(overload, "Out") || (flags & kOutVariant) != 0;
  props.mutates = props.in_place || props.out_variant || (flags & kMutates) != 0;
  props.random = (flags & kRandom) != 0;
  props.effectful = (flags & kEffectful) != 0;
  props.run_time_layout = (flags & kRunTimeLayout) != 0;
  if ((flags & kView) != 0) {
    props.alias = AliasKind::View;
  } else if ((flags & kMayAlias) != 0) {
    props.alias = AliasKind::MayAlias;
  }
  return props;
}

bool node_may_write(const Node& node) {
  OpProperties props = op_properties(node.op());
  std::optional<OpName> name = parse_op_name(node.op());
  if (name && name->ns == kAutogradFunctionNamespace) return false;
  if (!props.known_namespace) {
    bool reads_tensor = false;
    node.for_each_input([&](const Value* v) {
      reads_tensor =
          reads_tensor || v->kind() == ValueKind::Tensor || v->kind() == ValueKind::TensorList;
    });
    return reads_tensor;
  }
  // (input, weight, bias, running_mean, running_var, training, ...): the running
  // statistics are written only in training, and only when given.
  if ((node.op() == "aten::native_batch_norm" || node.op() == "aten::cudnn_batch_norm" ||
       node.op() == "aten::miopen_batch_norm") &&
      node.args().size() > 5) {
    bool training = node.arg(5).kind() != Argument::Kind::Bool || node.arg(5).as_bool();
    bool has_stats = !node.arg(3).is_none() || !node.arg(4).is_none();
    return training && has_stats;
  }
  return props.mutates;
}

namespace {

// Attention kernels that draw a dropout mask when their dropout_p, the argument at this
// position, is not zero.
struct DropoutAttention {
  std::string_view op;
  size_t dropout_index;
};
constexpr DropoutAttention kDropoutAttention[] = {
    {"aten::scaled_dot_product_attention", 4},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", 3},
    {"aten::_scaled_dot_product_flash_attention", 3},
    {"aten::_scaled_dot_product_efficient_attention", 5},
    {"aten::_scaled_dot_product_cudnn_attention", 5},
};

}  // namespace

const Argument* attention_dropout(const Node& node) {
  for (const DropoutAttention& entry : kDropoutAttention) {
    if (node.op() != entry.op) continue;
    if (const Argument* dropout = node.kwarg("dropout_p")) return dropout;
    return node.args().size() > entry.dropout_index ? &node.arg(entry.dropout_index) : nullptr;
  }
  return nullptr;
}

bool node_draws_random(const Node& node) {
  if (op_properties(node.op()).random) return true;
  const Argument* dropout = attention_dropout(node);
  if (dropout == nullptr || dropout->is_none()) return false;
  if (dropout->kind() == Argument::Kind::Double) return dropout->as_double() != 0.0;
  if (dropout->kind() == Argument::Kind::Int) return dropout->as_int() != 0;
  return true;  // a value known only at run time
}

}  // namespace dynvm::graph
