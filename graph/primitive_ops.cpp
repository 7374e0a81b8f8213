// The primitive operator list and the metadata rules of its operators.
#include "dynvm/graph/primitive_ops.h"

#include <algorithm>
#include <numeric>

#include "dynvm/graph/type_promotion.h"

namespace dynvm::graph {

namespace {

// How a pointwise op chooses its output dtype.
enum class DTypeRule : uint8_t {
  Same,         // the first tensor's dtype
  Float,        // the first tensor's, integral types giving float32 (exp, sigmoid, ...)
  Promote,      // torch.result_type of all operands
  PromoteTail,  // torch.result_type of the operands after the first (where.self)
  Divide,       // promoted, integral results giving float32 (true division)
  Bool,         // comparisons and logical ops
  ToCopy,       // the `dtype` keyword, else the input's
  Sum,          // the `dtype` keyword, else the input's with integral types giving int64
  Keep,         // reductions keeping the input dtype (amax, amin)
  View,         // views keep the input dtype
};

// X(operator, kind, dtype rule): the one list of primitive operators.
#define DYNVM_PRIMITIVE_OPS(X)                     \
  X("aten::neg", Pointwise, Same)                  \
  X("aten::exp", Pointwise, Float)                 \
  X("aten::log", Pointwise, Float)                 \
  X("aten::tanh", Pointwise, Float)                \
  X("aten::erf", Pointwise, Float)                 \
  X("aten::sigmoid", Pointwise, Float)             \
  X("aten::sqrt", Pointwise, Float)                \
  X("aten::rsqrt", Pointwise, Float)               \
  X("aten::abs", Pointwise, Same)                  \
  X("aten::relu", Pointwise, Same)                 \
  X("aten::reciprocal", Pointwise, Float)          \
  X("aten::sin", Pointwise, Float)                 \
  X("aten::cos", Pointwise, Float)                 \
  X("aten::log1p", Pointwise, Float)               \
  X("aten::expm1", Pointwise, Float)               \
  X("aten::logical_not", Pointwise, Bool)          \
  X("aten::add.Tensor", Pointwise, Promote)        \
  X("aten::add.Scalar", Pointwise, Promote)        \
  X("aten::sub.Tensor", Pointwise, Promote)        \
  X("aten::sub.Scalar", Pointwise, Promote)        \
  X("aten::mul.Tensor", Pointwise, Promote)        \
  X("aten::mul.Scalar", Pointwise, Promote)        \
  X("aten::div.Tensor", Pointwise, Divide)         \
  X("aten::div.Scalar", Pointwise, Divide)         \
  X("aten::pow.Tensor_Scalar", Pointwise, Promote) \
  X("aten::pow.Scalar", Pointwise, Promote)        \
  X("aten::maximum", Pointwise, Promote)           \
  X("aten::minimum", Pointwise, Promote)           \
  X("aten::eq.Tensor", Pointwise, Bool)            \
  X("aten::eq.Scalar", Pointwise, Bool)            \
  X("aten::ne.Tensor", Pointwise, Bool)            \
  X("aten::ne.Scalar", Pointwise, Bool)            \
  X("aten::lt.Tensor", Pointwise, Bool)            \
  X("aten::lt.Scalar", Pointwise, Bool)            \
  X("aten::le.Tensor", Pointwise, Bool)            \
  X("aten::le.Scalar", Pointwise, Bool)            \
  X("aten::gt.Tensor", Pointwise, Bool)            \
  X("aten::gt.Scalar", Pointwise, Bool)            \
  X("aten::ge.Tensor", Pointwise, Bool)            \
  X("aten::ge.Scalar", Pointwise, Bool)            \
  X("aten::logical_and", Pointwise, Bool)          \
  X("aten::logical_or", Pointwise, Bool)           \
  X("aten::where.self", Pointwise, PromoteTail)    \
  X("aten::clamp", Pointwise, Promote)             \
  X("aten::_to_copy", Pointwise, ToCopy)           \
  X("aten::sum.dim_IntList", Reduction, Sum)       \
  X("aten::amax", Reduction, Keep)                 \
  X("aten::amin", Reduction, Keep)                 \
  X("aten::view", View, View)                      \
  X("aten::reshape", View, View)                   \
  X("aten::expand", View, View)                    \
  X("aten::unsqueeze", View, View)                 \
  X("aten::squeeze.dim", View, View)               \
  X("aten::permute", View, View)                   \
  X("aten::t", View, View)                         \
  X("aten::transpose.int", View, View)             \
  X("aten::slice.Tensor", View, View)              \
  X("aten::select.int", View, View)                \
  X("aten::max_pool2d", Window, Keep)

struct PrimitiveEntry {
  std::string_view op;
  PrimitiveKind kind;
  DTypeRule rule;
};

constexpr PrimitiveEntry kPrimitives[] = {
#define DYNVM_PRIMITIVE_ENTRY(op, kind, rule) {op, PrimitiveKind::kind, DTypeRule::rule},
    DYNVM_PRIMITIVE_OPS(DYNVM_PRIMITIVE_ENTRY)
#undef DYNVM_PRIMITIVE_ENTRY
};

const PrimitiveEntry* find_entry(std::string_view op) {
  for (const PrimitiveEntry& e : kPrimitives) {
    if (e.op == op) return &e;
  }
  return nullptr;
}

const Argument* keyword(const std::vector<KeywordArgument>& kwargs, std::string_view name) {
  for (const KeywordArgument& k : kwargs) {
    if (k.name == name) return &k.value;
  }
  return nullptr;
}

// Positional argument `index`, else the keyword `name`, else nullptr.
const Argument* argument(const std::vector<Argument>& args,
                         const std::vector<KeywordArgument>& kwargs, size_t index,
                         std::string_view name) {
  if (index < args.size()) return &args[index];
  return keyword(kwargs, name);
}

Error fail(std::string_view op, const std::string& why) {
  return make_error(std::string(op) + ": " + why);
}

// A dimension index wrapped into [0, rank); kBadDim when out of range.
constexpr size_t kBadDim = static_cast<size_t>(-1);
size_t wrap_dim(int64_t dim, size_t rank) {
  int64_t r = static_cast<int64_t>(std::max<size_t>(rank, 1));
  if (dim < -r || dim >= r) return kBadDim;
  return static_cast<size_t>(dim < 0 ? dim + r : dim);
}
size_t wrap_dim(std::optional<int64_t> dim, size_t rank) {
  return dim ? wrap_dim(*dim, rank) : kBadDim;
}

bool is_tensor_value(const Argument& a) {
  return a.is_value() && a.as_value()->kind() == ValueKind::Tensor;
}

// The scalar kind of a literal or scalar value as a promotion operand, if it is one.
std::optional<DType> scalar_dtype(const Argument& a) {
  switch (a.kind()) {
    case Argument::Kind::Bool:
      return DType::Bool;
    case Argument::Kind::Int:
      return DType::Int64;
    case Argument::Kind::Double:
      return DType::Float64;
    case Argument::Kind::Value:
      switch (a.as_value()->kind()) {
        case ValueKind::Bool:
          return DType::Bool;
        case ValueKind::Int:
          return DType::Int64;
        case ValueKind::Float:
          return DType::Float64;
        default:
          return std::nullopt;
      }
    default:
      return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> int_list(const Argument& a) {
  if (a.kind() == Argument::Kind::Int) return std::vector<int64_t>{a.as_int()};
  if (!a.is_list()) return std::nullopt;
  std::vector<int64_t> out;
  for (const Argument& item : a.as_list()) {
    if (item.kind() != Argument::Kind::Int) return std::nullopt;
    out.push_back(item.as_int());
  }
  return out;
}

Expected<TensorMeta> pointwise_meta(const PrimitiveEntry& entry, const std::vector<Argument>& args,
                                    const std::vector<KeywordArgument>& kwargs) {
  std::vector<int64_t> sizes;
  std::vector<PromotionOperand> operands;
  const TensorMeta* first = nullptr;
  const TensorMeta* placement = nullptr;  // the device comes from a dimensioned tensor
  bool requires_grad = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const Argument& a = args[i];
    bool counts = !(entry.rule == DTypeRule::PromoteTail && i == 0);
    if (is_tensor_value(a)) {
      const TensorMeta* meta = a.as_value()->meta();
      if (meta == nullptr) return fail(entry.op, "a tensor argument has no metadata");
      auto b = broadcast_sizes(sizes, meta->sizes);
      if (!b) return fail(entry.op, "the argument sizes do not broadcast");
      sizes = *b;
      if (first == nullptr) first = meta;
      if (placement == nullptr || (placement->dim() == 0 && meta->dim() > 0)) placement = meta;
      requires_grad = requires_grad || meta->requires_grad;
      if (counts) {
        operands.push_back({meta->dim() == 0 ? PromotionOperand::Kind::ZeroDimTensor
                                             : PromotionOperand::Kind::Tensor,
                            meta->dtype});
      }
    } else if (auto scalar = scalar_dtype(a); scalar && counts) {
      operands.push_back({PromotionOperand::Kind::Scalar, *scalar});
    }
  }
  if (first == nullptr) return fail(entry.op, "no tensor argument");
  DType dtype = first->dtype;
  switch (entry.rule) {
    case DTypeRule::Same:
      break;
    case DTypeRule::Float:
      if (is_integral(dtype, /*include_bool=*/true)) dtype = DType::Float32;
      break;
    case DTypeRule::Promote:
    case DTypeRule::PromoteTail:
    case DTypeRule::Divide:
      dtype = result_type(operands).value_or(dtype);
      if (entry.rule == DTypeRule::Divide && is_integral(dtype, true)) dtype = DType::Float32;
      break;
    case DTypeRule::Bool:
      dtype = DType::Bool;
      break;
    case DTypeRule::ToCopy:
      if (const Argument* d = keyword(kwargs, "dtype"); d && !d->is_none()) dtype = d->as_dtype();
      break;
    default:
      return fail(entry.op, "not a pointwise rule");
  }
  TensorMeta out = TensorMeta::contiguous(dtype, sizes, placement->device, requires_grad);
  // Integer and bool results carry no gradient.
  if (!is_floating(dtype) && dtype != DType::Complex64 && dtype != DType::Complex128) {
    out.requires_grad = false;
  }
  return out;
}

Expected<TensorMeta> reduction_meta(const PrimitiveEntry& entry, const std::vector<Argument>& args,
                                    const std::vector<KeywordArgument>& kwargs) {
  const TensorMeta* in =
      args.empty() || !is_tensor_value(args[0]) ? nullptr : args[0].as_value()->meta();
  if (in == nullptr) return fail(entry.op, "the input has no tensor metadata");
  std::vector<int64_t> dims;
  if (const Argument* d = argument(args, kwargs, 1, "dim"); d && !d->is_none()) {
    auto list = int_list(*d);
    if (!list) return fail(entry.op, "dims must be a list of ints");
    dims = *list;
  }
  bool keepdim = false;
  if (const Argument* k = argument(args, kwargs, 2, "keepdim"); k && !k->is_none()) {
    if (k->kind() != Argument::Kind::Bool) return fail(entry.op, "keepdim must be a bool");
    keepdim = k->as_bool();
  }
  std::vector<bool> reduced(in->dim(), dims.empty());
  for (int64_t d : dims) {
    size_t w = wrap_dim(d, in->dim());
    if (w == kBadDim) return fail(entry.op, "dimension out of range");
    if (w < reduced.size()) reduced[w] = true;
  }
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < in->dim(); ++i) {
    if (!reduced[i]) {
      sizes.push_back(in->sizes[i]);
    } else if (keepdim) {
      sizes.push_back(1);
    }
  }
  DType dtype = in->dtype;
  if (entry.rule == DTypeRule::Sum) {
    if (const Argument* d = keyword(kwargs, "dtype"); d && !d->is_none()) {
      dtype = d->as_dtype();
    } else if (is_integral(dtype, true)) {
      dtype = DType::Int64;
    }
  }
  return TensorMeta::contiguous(dtype, sizes, in->device, in->requires_grad && is_floating(dtype));
}

Expected<TensorMeta> view_meta(std::string_view op, const std::vector<Argument>& args,
                               const std::vector<KeywordArgument>& kwargs) {
  const TensorMeta* in =
      args.empty() || !is_tensor_value(args[0]) ? nullptr : args[0].as_value()->meta();
  if (in == nullptr) return fail(op, "the input has no tensor metadata");
  TensorMeta out = *in;
  size_t rank = in->dim();
  auto int_arg = [&](size_t index, std::string_view name,
                     std::optional<int64_t> fallback) -> std::optional<int64_t> {
    const Argument* a = argument(args, kwargs, index, name);
    if (a == nullptr || a->is_none()) return fallback;
    if (a->kind() != Argument::Kind::Int) return std::nullopt;
    return a->as_int();
  };
  if (op == "aten::view" || op == "aten::reshape") {
    const Argument* s = argument(args, kwargs, 1, "size");
    auto sizes = s ? int_list(*s) : std::nullopt;
    if (!sizes) return fail(op, "sizes must be a list of ints");
    int64_t known = 1;
    std::optional<size_t> infer;
    for (size_t i = 0; i < sizes->size(); ++i) {
      if ((*sizes)[i] == -1) {
        if (infer) return fail(op, "only one size may be -1");
        infer = i;
      } else {
        known *= (*sizes)[i];
      }
    }
    if (infer) (*sizes)[*infer] = known == 0 ? 0 : in->numel() / known;
    int64_t n = std::accumulate(sizes->begin(), sizes->end(), int64_t{1}, std::multiplies<>());
    if (n != in->numel()) return fail(op, "the sizes do not match the number of elements");
    auto strides = view_strides(in->sizes, in->strides, *sizes);
    if (!strides) {
      if (op == "aten::view") return fail(op, "the input's strides allow no such view");
      strides = row_major_strides(*sizes);  // reshape copies
    }
    out.sizes = *sizes;
    out.strides = *strides;
    return out;
  }
  if (op == "aten::expand") {
    const Argument* s = argument(args, kwargs, 1, "size");
    auto sizes = s ? int_list(*s) : std::nullopt;
    if (!sizes || sizes->size() < rank) return fail(op, "sizes must list at least every dimension");
    size_t lead = sizes->size() - rank;
    out.sizes.assign(sizes->size(), 0);
    out.strides.assign(sizes->size(), 0);
    for (size_t i = 0; i < sizes->size(); ++i) {
      int64_t want = (*sizes)[i];
      if (i < lead) {
        if (want < 0) return fail(op, "a new dimension cannot be -1");
        out.sizes[i] = want;
        continue;
      }
      int64_t have = in->sizes[i - lead];
      if (want == -1 || want == have) {
        out.sizes[i] = have;
        out.strides[i] = in->strides[i - lead];
      } else if (have == 1) {
        out.sizes[i] = want;
      } else {
        return fail(op, "a dimension of size other than 1 cannot expand");
      }
    }
    return out;
  }
  if (op == "aten::unsqueeze") {
    auto dim = int_arg(1, "dim", std::nullopt);
    size_t d = wrap_dim(dim, rank + 1);
    if (d == kBadDim) return fail(op, "dimension out of range");
    int64_t stride = d < rank ? in->sizes[d] * in->strides[d] : 1;
    out.sizes.insert(out.sizes.begin() + static_cast<std::ptrdiff_t>(d), 1);
    out.strides.insert(out.strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
    return out;
  }
  if (op == "aten::squeeze.dim") {
    auto dim = int_arg(1, "dim", std::nullopt);
    size_t d = wrap_dim(dim, rank);
    if (d == kBadDim) return fail(op, "dimension out of range");
    if (rank > 0 && in->sizes[d] == 1) {
      out.sizes.erase(out.sizes.begin() + static_cast<std::ptrdiff_t>(d));
      out.strides.erase(out.strides.begin() + static_cast<std::ptrdiff_t>(d));
    }
    return out;
  }
  if (op == "aten::permute" || op == "aten::t" || op == "aten::transpose.int") {
    std::vector<size_t> order(rank);
    std::iota(order.begin(), order.end(), size_t{0});
    if (op == "aten::permute") {
      const Argument* p = argument(args, kwargs, 1, "dims");
      auto dims = p ? int_list(*p) : std::nullopt;
      if (!dims || dims->size() != rank) return fail(op, "dims must list every dimension once");
      std::vector<bool> seen(rank, false);
      for (size_t i = 0; i < rank; ++i) {
        size_t d = wrap_dim((*dims)[i], rank);
        if (d == kBadDim || seen[d]) return fail(op, "dims must list every dimension once");
        seen[d] = true;
        order[i] = d;
      }
    } else {
      if (op == "aten::t" && rank > 2) return fail(op, "expects a tensor of at most 2 dimensions");
      int64_t a = op == "aten::t" ? 0 : int_arg(1, "dim0", std::nullopt).value_or(-99);
      int64_t b = op == "aten::t" ? 1 : int_arg(2, "dim1", std::nullopt).value_or(-99);
      if (rank >= 2 || op != "aten::t") {
        size_t da = wrap_dim(a, rank);
        size_t db = wrap_dim(b, rank);
        if (da == kBadDim || db == kBadDim) return fail(op, "dimension out of range");
        if (rank > 0) std::swap(order[da], order[db]);
      }
    }
    for (size_t i = 0; i < rank; ++i) {
      out.sizes[i] = in->sizes[order[i]];
      out.strides[i] = in->strides[order[i]];
    }
    return out;
  }
  if (op == "aten::slice.Tensor") {
    auto dim = int_arg(1, "dim", 0);
    size_t d = wrap_dim(dim, rank);
    if (d == kBadDim || rank == 0) return fail(op, "dimension out of range");
    int64_t size = in->sizes[d];
    auto start = int_arg(2, "start", 0);
    auto end = int_arg(3, "end", size);
    auto step = int_arg(4, "step", 1);
    if (!start || !end || !step || *step <= 0) return fail(op, "bad start, end or step");
    int64_t s = *start < 0 ? *start + size : *start;
    int64_t e = *end < 0 ? *end + size : *end;
    s = std::clamp<int64_t>(s, 0, size);
    e = std::clamp<int64_t>(e, s, size);
    out.sizes[d] = (e - s + *step - 1) / *step;
    out.strides[d] = in->strides[d] * *step;
    return out;
  }
  if (op == "aten::select.int") {
    auto dim = int_arg(1, "dim", std::nullopt);
    size_t d = wrap_dim(dim, rank);
    auto index = int_arg(2, "index", std::nullopt);
    if (d == kBadDim || rank == 0 || !index) return fail(op, "dimension or index out of range");
    int64_t size = in->sizes[d];
    if (*index < -size || *index >= size) return fail(op, "index out of range");
    out.sizes.erase(out.sizes.begin() + static_cast<std::ptrdiff_t>(d));
    out.strides.erase(out.strides.begin() + static_cast<std::ptrdiff_t>(d));
    return out;
  }
  return fail(op, "not a view primitive");
}

}  // namespace

PrimitiveKind primitive_kind(std::string_view op) {
  const PrimitiveEntry* e = find_entry(op);
  return e == nullptr ? PrimitiveKind::Extern : e->kind;
}

PrimitiveKind primitive_kind(const Node& node) {
  PrimitiveKind kind = primitive_kind(node.op());
  if (kind == PrimitiveKind::Extern || node.num_outputs() != 1 ||
      node.output()->kind() != ValueKind::Tensor) {
    return PrimitiveKind::Extern;
  }
  if (node.op() == "aten::_to_copy") {
    // Only a dtype conversion: no change of device, layout or memory format.
    const TensorMeta* in = node.args().empty() || !is_tensor_value(node.arg(0))
                               ? nullptr
                               : node.arg(0).as_value()->meta();
    const TensorMeta* out = node.output()->meta();
    if (in == nullptr || out == nullptr || in->device != out->device) return PrimitiveKind::Extern;
    if (node.args().size() != 1) return PrimitiveKind::Extern;
    for (const KeywordArgument& k : node.kwargs()) {
      if (k.value.is_none() || k.name == "dtype" || k.name == "non_blocking") continue;
      if (k.name == "memory_format" && k.value.kind() == Argument::Kind::MemoryFormat &&
          k.value.as_memory_format() != MemoryFormat::ChannelsLast &&
          k.value.as_memory_format() != MemoryFormat::ChannelsLast3d) {
        continue;
      }
      if (k.name == "layout" && k.value.kind() == Argument::Kind::Layout &&
          k.value.as_layout() == Layout::Strided) {
        continue;
      }
      if (k.name == "device" && k.value.kind() == Argument::Kind::Device &&
          k.value.as_device() == in->device) {
        continue;
      }
      return PrimitiveKind::Extern;
    }
  }
  if (kind == PrimitiveKind::Window && !max_pool_window(node.args(), node.kwargs())) {
    return PrimitiveKind::Extern;
  }
  if (node.op() == "aten::pow.Scalar") {
    // A number to a tensor power: kernels compute it in floating point only (ATen's
    // integer powers are exact, and refuse negative exponents).
    const TensorMeta* out = node.output()->meta();
    if (out == nullptr || !is_floating(out->dtype)) return PrimitiveKind::Extern;
  }
  return kind;
}

std::string_view primitive_kind_name(PrimitiveKind kind) {
  switch (kind) {
    case PrimitiveKind::Extern:
      return "extern";
    case PrimitiveKind::Pointwise:
      return "pointwise";
    case PrimitiveKind::Reduction:
      return "reduction";
    case PrimitiveKind::View:
      return "view";
    case PrimitiveKind::Window:
      return "window";
  }
  return "?";
}

std::vector<std::string_view> primitive_ops() {
  std::vector<std::string_view> ops;
  for (const PrimitiveEntry& e : kPrimitives) ops.push_back(e.op);
  return ops;
}

Expected<TensorMeta> infer_primitive_meta(std::string_view op, const std::vector<Argument>& args,
                                          const std::vector<KeywordArgument>& kwargs) {
  const PrimitiveEntry* entry = find_entry(op);
  if (entry == nullptr) return fail(op, "not a primitive operator");
  switch (entry->kind) {
    case PrimitiveKind::Pointwise:
      return pointwise_meta(*entry, args, kwargs);
    case PrimitiveKind::Reduction:
      return reduction_meta(*entry, args, kwargs);
    case PrimitiveKind::View:
      return view_meta(op, args, kwargs);
    case PrimitiveKind::Window: {
      auto window = max_pool_window(args, kwargs);
      if (!window) return fail(op, "not a max pool of dilation 1 over a floating-point tensor");
      TensorMeta out = *args[0].as_value()->meta();
      out.sizes = window->out_sizes;
      out.strides = row_major_strides(out.sizes);
      return out;
    }
    case PrimitiveKind::Extern:
      break;
  }
  return fail(op, "not a primitive operator");
}

std::optional<PoolWindow> max_pool_window(const std::vector<Argument>& args,
                                          const std::vector<KeywordArgument>& kwargs) {
  const TensorMeta* in =
      args.empty() || !is_tensor_value(args[0]) ? nullptr : args[0].as_value()->meta();
  if (in == nullptr || (in->dim() != 3 && in->dim() != 4) || !is_floating(in->dtype)) {
    return std::nullopt;
  }
  // An int list of one or two entries, or `fallback` when absent or empty.
  auto pair =
      [&](size_t index, std::string_view name,
          std::optional<std::vector<int64_t>> fallback) -> std::optional<std::vector<int64_t>> {
    const Argument* a = argument(args, kwargs, index, name);
    if (a == nullptr || a->is_none()) return fallback;
    auto list = int_list(*a);
    if (!list || list->size() > 2) return std::nullopt;
    if (list->empty()) return fallback;
    if (list->size() == 1) list->push_back(list->front());
    return list;
  };
  auto kernel = pair(1, "kernel_size", std::nullopt);
  if (!kernel) return std::nullopt;
  auto stride = pair(2, "stride", kernel);
  auto padding = pair(3, "padding", std::vector<int64_t>{0, 0});
  auto dilation = pair(4, "dilation", std::vector<int64_t>{1, 1});
  const Argument* ceil = argument(args, kwargs, 5, "ceil_mode");
  if (!stride || !padding || !dilation || (*dilation)[0] != 1 || (*dilation)[1] != 1) {
    return std::nullopt;
  }
  if (ceil != nullptr && !ceil->is_none() && ceil->kind() != Argument::Kind::Bool) {
    return std::nullopt;
  }
  bool ceil_mode = ceil != nullptr && !ceil->is_none() && ceil->as_bool();
  PoolWindow w;
  w.out_sizes = in->sizes;
  for (size_t d = 0; d < 2; ++d) {
    int64_t k = (*kernel)[d];
    int64_t s = (*stride)[d];
    int64_t p = (*padding)[d];
    int64_t size = in->sizes[in->dim() - 2 + d];
    if (k <= 0 || s <= 0 || p < 0 || p > k / 2) return std::nullopt;
    // ATen's pooling_output_shape: a last window that would start in the right padding
    // is dropped.
    int64_t numerator = size + 2 * p - (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    if (numerator < 0) return std::nullopt;
    int64_t out = numerator / s + 1;
    if (ceil_mode && (out - 1) * s >= size + p) --out;
    if (out <= 0) return std::nullopt;
    w.kernel[d] = k;
    w.stride[d] = s;
    w.padding[d] = p;
    w.out_sizes[in->dim() - 2 + d] = out;
  }
  return w;
}

std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_sizes,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t s : old_sizes) numel *= s;
  if (old_sizes.empty() || numel == 0) return row_major_strides(sizes);
  // Walk chunks of old dimensions that are contiguous with one another; each chunk must
  // be split into new dimensions exactly (ATen's computeStride).
  std::vector<int64_t> strides(sizes.size(), 0);
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[static_cast<size_t>(d)];
    if (d == 0 || (old_sizes[static_cast<size_t>(d - 1)] != 1 &&
                   old_strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || sizes[static_cast<size_t>(view_d)] == 1)) {
        strides[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= sizes[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[static_cast<size_t>(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

}  // namespace dynvm::graph
