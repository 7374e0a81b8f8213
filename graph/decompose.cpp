// Decompositions of composite ATen operators into primitives, one function per operator.
#include "dynvm/graph/decompose.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>

#include "dynvm/graph/check.h"
#include "dynvm/graph/node_builder.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/graph/type_promotion.h"

namespace dynvm::graph {

namespace {

// What a decomposition sees: the node, a builder placed before it, and one result slot
// per node output. A decomposition returns false, having built nothing the graph keeps,
// when it does not apply; results may stay nullptr only for outputs nothing uses.
struct Rewrite {
  const Node& node;
  NodeBuilder& b;
  std::vector<Value*>& results;
  // Some node writes a tensor (functionalization left it): a copy may then not become
  // an alias.
  bool graph_mutates;

  const Argument* arg(size_t index, std::string_view name) const {
    if (index < node.args().size()) return &node.arg(index);
    return node.kwarg(name);
  }
  // A tensor argument, or nullptr when absent, None or without metadata.
  Value* tensor(size_t index, std::string_view name) const {
    const Argument* a = arg(index, name);
    if (a == nullptr || !a->is_value() || a->as_value()->kind() != ValueKind::Tensor ||
        a->as_value()->meta() == nullptr) {
      return nullptr;
    }
    return a->as_value();
  }
  std::optional<double> number(size_t index, std::string_view name, double fallback) const {
    const Argument* a = arg(index, name);
    if (a == nullptr || a->is_none()) return fallback;
    if (a->kind() == Argument::Kind::Double) return a->as_double();
    if (a->kind() == Argument::Kind::Int) return static_cast<double>(a->as_int());
    if (a->kind() == Argument::Kind::Bool) return a->as_bool() ? 1.0 : 0.0;
    return std::nullopt;
  }
  // A numeric literal kept as written (an int stays an int), or `fallback`.
  std::optional<Argument> scalar(size_t index, std::string_view name, Argument fallback) const {
    const Argument* a = arg(index, name);
    if (a == nullptr || a->is_none()) return fallback;
    if (a->kind() == Argument::Kind::Double || a->kind() == Argument::Kind::Int ||
        a->kind() == Argument::Kind::Bool) {
      return *a;
    }
    return std::nullopt;
  }
  std::optional<bool> flag(size_t index, std::string_view name, bool fallback) const {
    const Argument* a = arg(index, name);
    if (a == nullptr || a->is_none()) return fallback;
    if (a->kind() != Argument::Kind::Bool) return std::nullopt;
    return a->as_bool();
  }
  std::optional<std::vector<int64_t>> ints(size_t index, std::string_view name) const {
    const Argument* a = arg(index, name);
    if (a == nullptr || a->is_none()) return std::vector<int64_t>{};
    if (a->kind() == Argument::Kind::Int) return std::vector<int64_t>{a->as_int()};
    if (!a->is_list()) return std::nullopt;
    std::vector<int64_t> out;
    for (const Argument& item : a->as_list()) {
      if (item.kind() != Argument::Kind::Int) return std::nullopt;
      out.push_back(item.as_int());
    }
    return out;
  }
  const TensorMeta& out_meta(size_t i) const { return *node.output(i)->meta(); }
  bool output_used(size_t i) const { return node.output(i)->has_uses(); }
  bool any_output_returned() const {
    for (const Value* out : node.outputs()) {
      if (out->num_output_uses() > 0) return true;
    }
    return false;
  }
};

Argument real(double v) { return Argument::real(v); }

bool is_one(const Argument& a) {
  return (a.kind() == Argument::Kind::Int && a.as_int() == 1) ||
         (a.kind() == Argument::Kind::Double && a.as_double() == 1.0);
}

bool is_zero(const Argument& a) {
  return (a.kind() == Argument::Kind::Int && a.as_int() == 0) ||
         (a.kind() == Argument::Kind::Double && a.as_double() == 0.0);
}

// Dimensions wrapped into [0, rank); empty `dims` mean all of them.
std::optional<std::vector<int64_t>> reduced_dims(const std::vector<int64_t>& dims, size_t rank) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (size_t i = 0; i < rank; ++i) out.push_back(static_cast<int64_t>(i));
    return out;
  }
  auto r = static_cast<int64_t>(std::max<size_t>(rank, 1));
  for (int64_t d : dims) {
    if (d < -r || d >= r) return std::nullopt;
    out.push_back(d < 0 ? d + r : d);
  }
  return out;
}

int64_t reduced_numel(const TensorMeta& meta, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (static_cast<size_t>(d) < meta.dim()) n *= meta.sizes[static_cast<size_t>(d)];
  }
  return n;
}

// ATen's kernels of the activations below, glu and lerp take floating types only: an
// integral or bool input makes eager raise, so such a node is left to ATen to raise too.
Value* floating_tensor(const Rewrite& r, size_t index, std::string_view name) {
  Value* x = r.tensor(index, name);
  return x != nullptr && is_floating(x->meta()->dtype) ? x : nullptr;
}

// ----- activations

bool gelu(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  const Argument* approximate = r.arg(1, "approximate");
  std::string mode = "none";
  if (approximate != nullptr && !approximate->is_none()) {
    if (approximate->kind() != Argument::Kind::String) return false;
    mode = approximate->as_string();
  }
  if (x == nullptr || (mode != "none" && mode != "tanh")) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* inner = nullptr;
  if (mode == "none") {
    // x/2 * (1 + erf(x/sqrt(2)))
    inner = r.b.unary("aten::erf", r.b.binary("aten::mul.Scalar", xc, real(M_SQRT1_2)));
  } else {
    // x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    Value* cube = r.b.binary("aten::mul.Tensor", r.b.binary("aten::mul.Tensor", xc, xc), xc);
    Value* sum =
        r.b.binary("aten::add.Tensor", xc, r.b.binary("aten::mul.Scalar", cube, real(0.044715)));
    inner = r.b.unary("aten::tanh",
                      r.b.binary("aten::mul.Scalar", sum, real(M_SQRT2 * M_2_SQRTPI * 0.5)));
  }
  Value* scaled =
      r.b.binary("aten::mul.Tensor", xc, r.b.binary("aten::add.Scalar", inner, real(1.0)));
  r.results[0] = r.b.binary("aten::mul.Scalar", scaled, real(0.5));
  return true;
}

bool silu(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  if (x == nullptr) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  r.results[0] = r.b.binary("aten::mul.Tensor", xc, r.b.unary("aten::sigmoid", xc));
  return true;
}

// min(max(x + 3, 0), 6) as used by hardsigmoid and hardswish.
Value* relu6_shifted(Rewrite& r, Value* x) {
  return r.b.primitive("aten::clamp",
                       {r.b.binary("aten::add.Scalar", x, real(3.0)), real(0.0), real(6.0)});
}

bool hardsigmoid(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  if (x == nullptr) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  r.results[0] = r.b.binary("aten::div.Scalar", relu6_shifted(r, xc), real(6.0));
  return true;
}

bool hardswish(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  if (x == nullptr) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* gated = r.b.binary("aten::mul.Tensor", xc, relu6_shifted(r, xc));
  r.results[0] = r.b.binary("aten::div.Scalar", gated, real(6.0));
  return true;
}

bool hardtanh(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto lo = r.scalar(1, "min_val", real(-1.0));
  auto hi = r.scalar(2, "max_val", real(1.0));
  if (x == nullptr || !lo || !hi) return false;
  r.results[0] = r.b.primitive("aten::clamp", {x, *lo, *hi});
  return true;
}

bool relu6(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr) return false;
  r.results[0] = r.b.primitive("aten::clamp", {x, Argument::integer(0), Argument::integer(6)});
  return true;
}

bool leaky_relu(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  auto slope = r.scalar(1, "negative_slope", real(0.01));
  if (x == nullptr || !slope) return false;
  Value* positive = r.b.binary("aten::gt.Scalar", x, Argument::integer(0));
  r.results[0] =
      r.b.primitive("aten::where.self", {positive, x, r.b.binary("aten::mul.Scalar", x, *slope)});
  return true;
}

// log(1 + exp(beta x)) / beta, or x where beta x > threshold (ATen's softplus).
Value* softplus_of(Rewrite& r, Value* x, double beta, double threshold) {
  Value* scaled = beta == 1.0 ? x : r.b.binary("aten::mul.Scalar", x, real(beta));
  Value* soft = r.b.unary("aten::log1p", r.b.unary("aten::exp", scaled));
  if (beta != 1.0) soft = r.b.binary("aten::div.Scalar", soft, real(beta));
  Value* large = r.b.binary("aten::gt.Scalar", scaled, real(threshold));
  return r.b.primitive("aten::where.self", {large, x, soft});
}

bool softplus(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  auto beta = r.number(1, "beta", 1.0);
  auto threshold = r.number(2, "threshold", 20.0);
  if (x == nullptr || !beta || !threshold) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  r.results[0] = softplus_of(r, xc, *beta, *threshold);
  return true;
}

bool mish(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  if (x == nullptr) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  r.results[0] =
      r.b.binary("aten::mul.Tensor", xc, r.b.unary("aten::tanh", softplus_of(r, xc, 1.0, 20.0)));
  return true;
}

bool elu(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  auto alpha = r.number(1, "alpha", 1.0);
  auto scale = r.number(2, "scale", 1.0);
  auto input_scale = r.number(3, "input_scale", 1.0);
  if (x == nullptr || !alpha || !scale || !input_scale) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* negative =
      r.b.unary("aten::expm1", r.b.binary("aten::mul.Scalar", xc, real(*input_scale)));
  negative = r.b.binary("aten::mul.Scalar", negative, real(*alpha * *scale));
  Value* positive = r.b.binary("aten::mul.Scalar", xc, real(*scale));
  Value* is_positive = r.b.binary("aten::gt.Scalar", xc, Argument::integer(0));
  r.results[0] = r.b.primitive("aten::where.self", {is_positive, positive, negative});
  return true;
}

bool rsub_scalar(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto other = r.scalar(1, "other", Argument::integer(0));
  auto alpha = r.scalar(2, "alpha", Argument::integer(1));
  if (x == nullptr || !other || !alpha) return false;
  // ATen refuses to subtract from a bool (torch.rsub(x, True)): left to ATen to raise.
  if (other->kind() == Argument::Kind::Bool || x->meta()->dtype == DType::Bool) return false;
  Value* scaled = is_one(*alpha) ? x : r.b.binary("aten::mul.Scalar", x, *alpha);
  r.results[0] = r.b.binary("aten::add.Scalar", r.b.unary("aten::neg", scaled), *other);
  return true;
}

bool rsub_tensor(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  Value* y = r.tensor(1, "other");
  auto alpha = r.scalar(2, "alpha", Argument::integer(1));
  if (x == nullptr || y == nullptr || !alpha) return false;
  r.results[0] = r.b.primitive("aten::sub.Tensor", {y, x}, {{"alpha", *alpha}});
  return true;
}

bool square(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr) return false;
  r.results[0] = r.b.binary("aten::mul.Tensor", x, x);
  return true;
}

// self + value * (t1 combine t2). ATen first converts `value` to the result's type, so an
// integral result uses the truncated value (addcmul(x, y, z, value=0.5) adds nothing for
// integers); ATen has no bool kernel.
bool addcmul_like(Rewrite& r, const char* combine) {
  Value* self = r.tensor(0, "self");
  Value* t1 = r.tensor(1, "tensor1");
  Value* t2 = r.tensor(2, "tensor2");
  auto value = r.scalar(3, "value", Argument::integer(1));
  if (self == nullptr || t1 == nullptr || t2 == nullptr || !value) return false;
  DType result = r.out_meta(0).dtype;
  if (result == DType::Bool) return false;
  if (is_integral(result, false) && value->kind() == Argument::Kind::Double) {
    value = Argument::integer(static_cast<int64_t>(value->as_double()));
  }
  Value* term = r.b.binary(combine, t1, t2);
  if (!is_one(*value)) term = r.b.binary("aten::mul.Scalar", term, *value);
  r.results[0] = r.b.binary("aten::add.Tensor", self, term);
  return true;
}

bool addcmul(Rewrite& r) { return addcmul_like(r, "aten::mul.Tensor"); }
bool addcdiv(Rewrite& r) { return addcmul_like(r, "aten::div.Tensor"); }

// self + w (end - self) for |w| < 0.5, else end - (end - self)(1 - w), as ATen computes it.
bool lerp_scalar(Rewrite& r) {
  Value* self = floating_tensor(r, 0, "self");
  Value* end = r.tensor(1, "end");
  auto weight = r.number(2, "weight", 0.0);
  if (self == nullptr || end == nullptr || !weight) return false;
  Value* diff = r.b.binary("aten::sub.Tensor", end, self);
  if (std::abs(*weight) < 0.5) {
    r.results[0] =
        r.b.binary("aten::add.Tensor", self, r.b.binary("aten::mul.Scalar", diff, real(*weight)));
  } else {
    r.results[0] = r.b.binary("aten::sub.Tensor", end,
                              r.b.binary("aten::mul.Scalar", diff, real(1.0 - *weight)));
  }
  return true;
}

bool lerp_tensor(Rewrite& r) {
  Value* self = floating_tensor(r, 0, "self");
  Value* end = r.tensor(1, "end");
  Value* weight = r.tensor(2, "weight");
  if (self == nullptr || end == nullptr || weight == nullptr) return false;
  Value* diff = r.b.binary("aten::sub.Tensor", end, self);
  Value* low = r.b.binary("aten::add.Tensor", self, r.b.binary("aten::mul.Tensor", weight, diff));
  Value* one_minus = r.b.binary("aten::add.Scalar", r.b.unary("aten::neg", weight), real(1.0));
  Value* high =
      r.b.binary("aten::sub.Tensor", end, r.b.binary("aten::mul.Tensor", diff, one_minus));
  Value* small = r.b.binary("aten::lt.Scalar", r.b.unary("aten::abs", weight), real(0.5));
  r.results[0] = r.b.primitive("aten::where.self", {small, low, high});
  return true;
}

bool clamp_min(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto bound = r.scalar(1, "min", Argument());
  if (x == nullptr || !bound || bound->is_none()) return false;
  r.results[0] = r.b.primitive("aten::clamp", {x, *bound, Argument()});
  return true;
}

bool clamp_max(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto bound = r.scalar(1, "max", Argument());
  if (x == nullptr || !bound || bound->is_none()) return false;
  r.results[0] = r.b.primitive("aten::clamp", {x, Argument(), *bound});
  return true;
}

bool clamp_min_tensor(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  Value* bound = r.tensor(1, "min");
  if (x == nullptr || bound == nullptr) return false;
  r.results[0] = r.b.binary("aten::maximum", x, bound);
  return true;
}

bool clamp_max_tensor(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  Value* bound = r.tensor(1, "max");
  if (x == nullptr || bound == nullptr) return false;
  r.results[0] = r.b.binary("aten::minimum", x, bound);
  return true;
}

// First half of `dim` times the sigmoid of the second half.
bool glu(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  auto dim = r.number(1, "dim", -1.0);
  if (x == nullptr || !dim || x->meta()->dim() == 0) return false;
  auto wrapped = reduced_dims({static_cast<int64_t>(*dim)}, x->meta()->dim());
  if (!wrapped) return false;
  int64_t d = (*wrapped)[0];
  int64_t size = x->meta()->sizes[static_cast<size_t>(d)];
  if (size % 2 != 0) return false;
  auto half = [&](int64_t start) {
    return r.b.primitive("aten::slice.Tensor", {x, Argument::integer(d), Argument::integer(start),
                                                Argument::integer(start + size / 2)});
  };
  Value* gate = r.b.unary("aten::sigmoid", half(size / 2));
  r.results[0] = r.b.binary("aten::mul.Tensor", half(0), gate);
  return true;
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); the buffer (output 1) must be unused.
bool log_sigmoid_forward(Rewrite& r) {
  Value* x = floating_tensor(r, 0, "self");
  if (x == nullptr || r.output_used(1)) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* negative_part = r.b.primitive("aten::clamp", {xc, Argument(), real(0.0)});
  Value* tail = r.b.unary(
      "aten::log1p", r.b.unary("aten::exp", r.b.unary("aten::neg", r.b.unary("aten::abs", xc))));
  r.results[0] = r.b.binary("aten::sub.Tensor", negative_part, tail);
  return true;
}

// ----- constants and masks

bool real_tensor(const Value* x) {
  return x != nullptr && x->meta()->dtype != DType::Complex64 &&
         x->meta()->dtype != DType::Complex128;
}

// The largest finite value of a floating dtype (complex: of its components).
double largest_finite(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return 65504.0;
    case DType::BFloat16:
      return 3.38953138925153547590470800371487866880e38;
    case DType::Float32:
    case DType::Complex64:
      return 3.40282346638528859811704183484516925440e38;
    default:
      return INFINITY;
  }
}

// Whether ATen converts the literal `value` to `dtype` for fill_, full_like, masked_fill
// and threshold without c10::checked_convert failing ("value cannot be converted to type
// int64_t without overflow": 1e20 or NaN for an integer, 300 for uint8, 1e300 for
// float32). False where unsure: the node then stays with ATen.
bool literal_fits(const Argument& value, DType dtype) {
  if (value.kind() == Argument::Kind::Bool) return true;
  if (value.kind() != Argument::Kind::Int && value.kind() != Argument::Kind::Double) return false;
  bool is_int = value.kind() == Argument::Kind::Int;
  double v = is_int ? static_cast<double>(value.as_int()) : value.as_double();
  if (dtype == DType::Bool) return v == 0.0 || v == 1.0;
  if (is_integral(dtype, false)) {
    if (dtype == DType::Int64) return is_int || (v >= -0x1p63 && v < 0x1p63);
    int bits = 8 * dtype_itemsize(dtype);
    double low = dtype == DType::UInt8 ? 0.0 : -std::ldexp(1.0, bits - 1);
    double end = dtype == DType::UInt8 ? 256.0 : std::ldexp(1.0, bits - 1);
    return v >= low && v < end;  // false for NaN
  }
  return std::isnan(v) || std::isinf(v) || std::abs(v) <= largest_finite(dtype);
}

// Whether every value of dtype `from` converts to `to` without that check failing.
bool dtype_fits(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  bool complex_from = from == DType::Complex64 || from == DType::Complex128;
  bool complex_to = to == DType::Complex64 || to == DType::Complex128;
  if (is_integral(from, false)) {
    if (is_integral(to, false)) return promote_types(from, to) == to;
    return to != DType::Bool && to != DType::Float16 && to != DType::BFloat16;
  }
  if (complex_from && !complex_to) return false;
  return (is_floating(to) || complex_to) && largest_finite(from) <= largest_finite(to);
}

// `value` everywhere, shaped like `like`, converted to `dtype` as ATen casts fills.
Value* filled_like(Rewrite& r, Value* like, const Argument& value, DType dtype) {
  Value* filled = r.b.binary("aten::add.Scalar", r.b.zeros_like(like, dtype), value);
  return r.b.convert(filled, dtype);
}

// full_like, zeros_like, ones_like: only when they keep the device and layout.
bool filled(Rewrite& r, Argument value) {
  Value* x = r.tensor(0, "self");
  if (!real_tensor(x)) return false;
  for (const KeywordArgument& k : r.node.kwargs()) {
    if (k.value.is_none() || k.name == "dtype" ||
        (k.name == "memory_format" && k.value.kind() == Argument::Kind::MemoryFormat &&
         k.value.as_memory_format() == MemoryFormat::Preserve)) {
      continue;
    }
    return false;
  }
  if (!literal_fits(value, r.out_meta(0).dtype)) return false;
  r.results[0] = filled_like(r, x, value, r.out_meta(0).dtype);
  return true;
}

bool full_like(Rewrite& r) {
  auto value = r.scalar(1, "fill_value", Argument());
  if (!value || value->is_none()) return false;
  return filled(r, *value);
}
bool zeros_like_op(Rewrite& r) { return filled(r, Argument::integer(0)); }
bool ones_like_op(Rewrite& r) { return filled(r, Argument::integer(1)); }

bool masked_fill_scalar(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  Value* mask = r.tensor(1, "mask");
  auto value = r.scalar(2, "value", Argument());
  if (!real_tensor(x) || mask == nullptr || !value || value->is_none() ||
      !literal_fits(*value, x->meta()->dtype)) {
    return false;
  }
  Value* fill = filled_like(r, x, *value, x->meta()->dtype);
  r.results[0] = r.b.primitive("aten::where.self", {mask, fill, x});
  return true;
}

bool masked_fill_tensor(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  Value* mask = r.tensor(1, "mask");
  Value* value = r.tensor(2, "value");
  // ATen converts value.item() with the same check as a literal.
  if (!real_tensor(x) || mask == nullptr || value == nullptr || value->meta()->dim() != 0 ||
      !dtype_fits(value->meta()->dtype, x->meta()->dtype)) {
    return false;
  }
  r.results[0] = r.b.primitive("aten::where.self", {mask, r.b.convert(value, x->meta()->dtype), x});
  return true;
}

bool where_scalar_other(Rewrite& r) {
  Value* condition = r.tensor(0, "condition");
  Value* x = r.tensor(1, "self");
  auto other = r.scalar(2, "other", Argument());
  if (condition == nullptr || !real_tensor(x) || !other || other->is_none()) return false;
  Value* fill = r.b.binary("aten::add.Scalar", r.b.zeros_like(x, x->meta()->dtype), *other);
  r.results[0] = r.b.primitive("aten::where.self", {condition, x, fill});
  return true;
}

bool where_scalar_self(Rewrite& r) {
  Value* condition = r.tensor(0, "condition");
  auto self = r.scalar(1, "self", Argument());
  Value* other = r.tensor(2, "other");
  if (condition == nullptr || !real_tensor(other) || !self || self->is_none()) return false;
  Value* fill = r.b.binary("aten::add.Scalar", r.b.zeros_like(other, other->meta()->dtype), *self);
  r.results[0] = r.b.primitive("aten::where.self", {condition, fill, other});
  return true;
}

bool threshold(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto limit = r.scalar(1, "threshold", Argument());
  auto value = r.scalar(2, "value", Argument());
  // ATen has no bool kernel.
  if (!real_tensor(x) || x->meta()->dtype == DType::Bool) return false;
  if (!limit || limit->is_none() || !value || value->is_none() ||
      !literal_fits(*value, x->meta()->dtype)) {
    return false;
  }
  Value* below = r.b.binary("aten::le.Scalar", x, *limit);
  r.results[0] =
      r.b.primitive("aten::where.self", {below, filled_like(r, x, *value, x->meta()->dtype), x});
  return true;
}

// ----- normalisation

// ATen's normalisation kernels take parameters (weight, bias, running statistics) all of
// the input's dtype, or all float32 for a half-precision input (batch_norm's mixed-dtype
// path; layer_norm's and group_norm's too since torch 2.0). Other dtypes raise, so such a
// node is left to ATen.
bool parameters_fit(const Value* input, std::initializer_list<const Value*> parameters) {
  DType x = input->meta()->dtype;
  bool same = true;
  bool float32 = x == DType::Float16 || x == DType::BFloat16;
  for (const Value* p : parameters) {
    if (p == nullptr) continue;
    same = same && p->meta()->dtype == x;
    float32 = float32 && p->meta()->dtype == DType::Float32;
  }
  return same || float32;
}

bool native_layer_norm(Rewrite& r) {
  Value* x = r.tensor(0, "input");
  auto shape = r.ints(1, "normalized_shape");
  Value* weight = r.tensor(2, "weight");
  Value* bias = r.tensor(3, "bias");
  auto eps = r.number(4, "eps", 1e-5);
  if (x == nullptr || !shape || shape->size() > x->meta()->dim() || !eps) return false;
  if (!parameters_fit(x, {weight, bias})) return false;
  size_t rank = x->meta()->dim();
  std::vector<int64_t> dims;
  for (size_t i = rank - shape->size(); i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
  auto n = static_cast<double>(reduced_numel(*x->meta(), dims));
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* mean = r.b.binary("aten::div.Scalar", r.b.sum(xc, dims, true), real(n));
  Value* centred = r.b.binary("aten::sub.Tensor", xc, mean);
  Value* squares = r.b.binary("aten::mul.Tensor", centred, centred);
  Value* var = r.b.binary("aten::div.Scalar", r.b.sum(squares, dims, true), real(n));
  Value* rstd = r.b.unary("aten::rsqrt", r.b.binary("aten::add.Scalar", var, real(*eps)));
  Value* y = r.b.binary("aten::mul.Tensor", centred, rstd);
  if (weight != nullptr) y = r.b.binary("aten::mul.Tensor", y, weight);
  if (bias != nullptr) y = r.b.binary("aten::add.Tensor", y, bias);
  r.results[0] = y;
  if (r.results.size() == 3) {
    r.results[1] = mean;
    r.results[2] = rstd;
  }
  return true;
}

// Eval-mode batch norm over dimension 1 with the running statistics; the saved
// statistics (outputs 1 and 2) must be unused, since eval mode returns empty tensors.
bool batch_norm_eval(Rewrite& r, Value* x, Value* weight, Value* bias, Value* mean, Value* var,
                     double eps) {
  if (x == nullptr || mean == nullptr || var == nullptr || x->meta()->dim() < 2) return false;
  if (!parameters_fit(x, {weight, bias, mean, var})) return false;
  for (size_t i = 1; i < r.node.num_outputs(); ++i) {
    if (r.output_used(i)) return false;
  }
  size_t rank = x->meta()->dim();
  std::vector<int64_t> channel_shape(rank - 1, 1);
  channel_shape[0] = x->meta()->sizes[1];
  DType compute = computation_dtype(x->meta()->dtype);
  Value* invstd = r.b.unary("aten::rsqrt",
                            r.b.binary("aten::add.Scalar", r.b.convert(var, compute), real(eps)));
  Value* scale = weight == nullptr ? invstd : r.b.binary("aten::mul.Tensor", invstd, weight);
  Value* xc = r.b.convert(x, compute);
  Value* centred = r.b.binary("aten::sub.Tensor", xc, r.b.reshape(mean, channel_shape));
  Value* y = r.b.binary("aten::mul.Tensor", centred, r.b.reshape(scale, channel_shape));
  if (bias != nullptr) y = r.b.binary("aten::add.Tensor", y, r.b.reshape(bias, channel_shape));
  r.results[0] = y;
  return true;
}

// Training-mode batch norm without running statistics (what functionalization makes of
// one with them): batch statistics over all dimensions but 1; outputs 1 and 2 are the
// batch mean and 1 / sqrt(biased variance + eps), each of shape [C].
bool batch_norm_training(Rewrite& r, double eps) {
  Value* x = r.tensor(0, "input");
  Value* weight = r.tensor(1, "weight");
  Value* bias = r.tensor(2, "bias");
  if (x == nullptr || x->meta()->dim() < 2 || !parameters_fit(x, {weight, bias})) return false;
  const TensorMeta& meta = *x->meta();
  size_t rank = meta.dim();
  std::vector<int64_t> dims = {0};
  for (size_t d = 2; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
  std::vector<int64_t> channel_shape(rank - 1, 1);
  channel_shape[0] = meta.sizes[1];
  double count = static_cast<double>(reduced_numel(meta, dims));
  Value* xc = r.b.convert(x, computation_dtype(meta.dtype));
  Value* mean = r.b.binary("aten::div.Scalar", r.b.sum(xc, dims, false), real(count));
  Value* centred = r.b.binary("aten::sub.Tensor", xc, r.b.reshape(mean, channel_shape));
  Value* var = r.b.binary("aten::div.Scalar",
                          r.b.sum(r.b.binary("aten::mul.Tensor", centred, centred), dims, false),
                          real(count));
  Value* invstd = r.b.unary("aten::rsqrt", r.b.binary("aten::add.Scalar", var, real(eps)));
  Value* scale = weight == nullptr ? invstd : r.b.binary("aten::mul.Tensor", invstd, weight);
  Value* y = r.b.binary("aten::mul.Tensor", centred, r.b.reshape(scale, channel_shape));
  if (bias != nullptr) y = r.b.binary("aten::add.Tensor", y, r.b.reshape(bias, channel_shape));
  r.results[0] = y;
  r.results[1] = mean;
  r.results[2] = invstd;
  return true;
}

bool native_batch_norm(Rewrite& r) {
  auto training = r.flag(5, "training", true);
  auto eps = r.number(7, "eps", 1e-5);
  if (!training || !eps) return false;
  if (*training) {
    const Argument* mean = r.arg(3, "running_mean");
    const Argument* var = r.arg(4, "running_var");
    if (mean == nullptr || var == nullptr || !mean->is_none() || !var->is_none()) return false;
    return batch_norm_training(r, *eps);
  }
  return batch_norm_eval(r, r.tensor(0, "input"), r.tensor(1, "weight"), r.tensor(2, "bias"),
                         r.tensor(3, "running_mean"), r.tensor(4, "running_var"), *eps);
}

// torch 2.x without running statistics: (input, weight, bias, training, momentum, eps).
bool batch_norm_no_stats(Rewrite& r) {
  auto training = r.flag(3, "training", true);
  auto eps = r.number(5, "eps", 1e-5);
  if (!training || !*training || !eps) return false;
  return batch_norm_training(r, *eps);
}

// cuDNN's (and MIOpen's) batch norm, which CUDA graphs record: native_batch_norm's
// arguments ("epsilon" for eps) and a fourth output, the kernel's reserve space. Eval only.
bool vendor_batch_norm(Rewrite& r) {
  auto training = r.flag(5, "training", true);
  auto eps = r.number(7, "epsilon", 1e-5);
  if (!training || *training || !eps) return false;
  return batch_norm_eval(r, r.tensor(0, "input"), r.tensor(1, "weight"), r.tensor(2, "bias"),
                         r.tensor(3, "running_mean"), r.tensor(4, "running_var"), *eps);
}

bool batch_norm_no_training(Rewrite& r) {
  auto eps = r.number(6, "eps", 1e-5);
  if (!eps) return false;
  return batch_norm_eval(r, r.tensor(0, "input"), r.tensor(1, "weight"), r.tensor(2, "bias"),
                         r.tensor(3, "running_mean"), r.tensor(4, "running_var"), *eps);
}

// Group norm: statistics over each of `group` groups of channels (with the spatial
// dimensions); outputs 1 and 2 are mean and rstd of shape [N, group].
bool native_group_norm(Rewrite& r) {
  Value* x = r.tensor(0, "input");
  Value* weight = r.tensor(1, "weight");
  Value* bias = r.tensor(2, "bias");
  auto n = r.number(3, "N", -1.0);
  auto c = r.number(4, "C", -1.0);
  auto groups = r.number(6, "group", -1.0);
  auto eps = r.number(7, "eps", 1e-5);
  if (x == nullptr || !n || !c || !groups || !eps || *groups <= 0 || x->meta()->dim() < 2 ||
      !parameters_fit(x, {weight, bias})) {
    return false;
  }
  // Eager's kernel keeps a channels-last input's layout in its result (the meta kernel
  // may claim row-major); the decomposition's result is row-major.
  if (x->meta()->strides != row_major_strides(x->meta()->sizes)) return false;
  const TensorMeta& meta = *x->meta();
  auto batch = static_cast<int64_t>(*n);
  auto channels = static_cast<int64_t>(*c);
  auto g = static_cast<int64_t>(*groups);
  if (batch != meta.sizes[0] || channels != meta.sizes[1] || channels % g != 0 || batch * g == 0) {
    return false;
  }
  int64_t per_group = meta.numel() / (batch * g);
  Value* xc = r.b.convert(x, computation_dtype(meta.dtype));
  Value* grouped = r.b.reshape(xc, {batch, g, per_group});
  Value* mean = r.b.binary("aten::div.Scalar", r.b.sum(grouped, {2}, true),
                           real(static_cast<double>(per_group)));
  Value* centred = r.b.binary("aten::sub.Tensor", grouped, mean);
  Value* squares = r.b.binary("aten::mul.Tensor", centred, centred);
  Value* var = r.b.binary("aten::div.Scalar", r.b.sum(squares, {2}, true),
                          real(static_cast<double>(per_group)));
  Value* rstd = r.b.unary("aten::rsqrt", r.b.binary("aten::add.Scalar", var, real(*eps)));
  Value* y = r.b.reshape(r.b.binary("aten::mul.Tensor", centred, rstd), meta.sizes);
  std::vector<int64_t> channel_shape(meta.dim() - 1, 1);
  channel_shape[0] = channels;
  if (weight != nullptr) y = r.b.binary("aten::mul.Tensor", y, r.b.reshape(weight, channel_shape));
  if (bias != nullptr) y = r.b.binary("aten::add.Tensor", y, r.b.reshape(bias, channel_shape));
  r.results[0] = y;
  r.results[1] = mean;
  r.results[2] = rstd;
  return true;
}

// softmax and log_softmax along `dim`, computed in float32 for half inputs.
bool softmax_like(Rewrite& r, bool log, std::optional<DType> input_dtype) {
  Value* x = r.tensor(0, "self");
  auto dim = r.ints(1, "dim");
  if (x == nullptr || !dim || dim->size() != 1) return false;
  DType start = input_dtype.value_or(x->meta()->dtype);
  if (!is_floating(start)) return false;
  Value* xc = r.b.convert(r.b.convert(x, start), computation_dtype(start));
  Value* shifted = r.b.binary("aten::sub.Tensor", xc, r.b.amax(xc, *dim, true));
  Value* exps = r.b.unary("aten::exp", shifted);
  Value* total = r.b.sum(exps, *dim, true);
  r.results[0] = log ? r.b.binary("aten::sub.Tensor", shifted, r.b.unary("aten::log", total))
                     : r.b.binary("aten::div.Tensor", exps, total);
  return true;
}

bool softmax_internal(Rewrite& r) { return softmax_like(r, false, std::nullopt); }
bool log_softmax_internal(Rewrite& r) { return softmax_like(r, true, std::nullopt); }

std::optional<DType> dtype_keyword(Rewrite& r, size_t index) {
  const Argument* d = r.arg(index, "dtype");
  if (d == nullptr || d->kind() != Argument::Kind::DType) return std::nullopt;
  return d->as_dtype();
}

bool softmax_int(Rewrite& r) { return softmax_like(r, false, dtype_keyword(r, 2)); }
bool log_softmax_int(Rewrite& r) { return softmax_like(r, true, dtype_keyword(r, 2)); }

// ----- reductions

// The mean over `dims` (all when empty).
bool mean_over(Rewrite& r, Value* x, const std::vector<int64_t>& dims, bool keepdim,
               std::optional<DType> dtype) {
  DType start = dtype.value_or(x->meta()->dtype);
  if (!is_floating(start)) return false;
  auto wrapped = reduced_dims(dims, x->meta()->dim());
  if (!wrapped) return false;
  auto n = static_cast<double>(reduced_numel(*x->meta(), *wrapped));
  Value* xc = r.b.convert(r.b.convert(x, start), computation_dtype(start));
  r.results[0] = r.b.binary("aten::div.Scalar", r.b.sum(xc, *wrapped, keepdim), real(n));
  return true;
}

// log(sum(exp(x - m))) + m with m the maximum, taken as 0 where it is infinite (so rows
// of -inf give -inf, not NaN), as ATen does.
bool logsumexp(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto dims = r.ints(1, "dim");
  auto keepdim = r.flag(2, "keepdim", false);
  if (x == nullptr || !is_floating(x->meta()->dtype) || !dims || !keepdim) return false;
  auto wrapped = reduced_dims(*dims, x->meta()->dim());
  if (!wrapped) return false;
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* maximum = r.b.amax(xc, *wrapped, true);
  Value* infinite = r.b.binary("aten::eq.Scalar", r.b.unary("aten::abs", maximum), real(INFINITY));
  Value* shift = r.b.primitive(
      "aten::where.self", {infinite, r.b.zeros_like(maximum, maximum->meta()->dtype), maximum});
  Value* total = r.b.sum(r.b.unary("aten::exp", r.b.binary("aten::sub.Tensor", xc, shift)),
                         *wrapped, *keepdim);
  Value* logs = r.b.unary("aten::log", total);
  r.results[0] = r.b.binary("aten::add.Tensor", logs, r.b.reshape(shift, logs->meta()->sizes));
  return true;
}

bool mean_dim(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  auto dims = r.ints(1, "dim");
  auto keepdim = r.flag(2, "keepdim", false);
  if (x == nullptr || !dims || !keepdim) return false;
  return mean_over(r, x, *dims, *keepdim, dtype_keyword(r, 3));
}

bool mean_all(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr) return false;
  return mean_over(r, x, {}, false, dtype_keyword(r, 1));
}

bool sum_all(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr) return false;
  auto dims = *reduced_dims({}, x->meta()->dim());
  std::vector<KeywordArgument> kwargs;
  if (auto dtype = dtype_keyword(r, 1)) kwargs.push_back({"dtype", Argument::dtype(*dtype)});
  r.results[0] = r.b.primitive("aten::sum.dim_IntList",
                               {x, Argument::int_list(dims), Argument::boolean(false)}, kwargs);
  return true;
}

// Variance with `correction` over `dims`; with `with_mean`, output 1 is the mean
// (var_mean); with `root`, the standard deviation.
bool variance(Rewrite& r, Value* x, const std::vector<int64_t>& dims, double correction,
              bool keepdim, bool root, bool with_mean) {
  if (x == nullptr || !is_floating(x->meta()->dtype)) return false;
  auto wrapped = reduced_dims(dims, x->meta()->dim());
  if (!wrapped) return false;
  auto n = static_cast<double>(reduced_numel(*x->meta(), *wrapped));
  Value* xc = r.b.convert(x, computation_dtype(x->meta()->dtype));
  Value* mean = r.b.binary("aten::div.Scalar", r.b.sum(xc, *wrapped, true), real(n));
  Value* centred = r.b.binary("aten::sub.Tensor", xc, mean);
  Value* squares = r.b.binary("aten::mul.Tensor", centred, centred);
  Value* var = r.b.binary("aten::div.Scalar", r.b.sum(squares, *wrapped, keepdim),
                          real(std::max(n - correction, 0.0)));
  r.results[0] = root ? r.b.unary("aten::sqrt", var) : var;
  if (with_mean && r.results.size() == 2) r.results[1] = mean;
  return true;
}

bool var_correction(Rewrite& r, bool root, bool with_mean) {
  auto dims = r.ints(1, "dim");
  auto correction = r.number(2, "correction", 1.0);
  auto keepdim = r.flag(3, "keepdim", false);
  if (!dims || !correction || !keepdim) return false;
  return variance(r, r.tensor(0, "self"), *dims, *correction, *keepdim, root, with_mean);
}

bool var_dim(Rewrite& r, bool root) {
  auto dims = r.ints(1, "dim");
  auto unbiased = r.flag(2, "unbiased", true);
  auto keepdim = r.flag(3, "keepdim", false);
  if (!dims || !unbiased || !keepdim) return false;
  return variance(r, r.tensor(0, "self"), *dims, *unbiased ? 1.0 : 0.0, *keepdim, root, false);
}

bool var_all(Rewrite& r, bool root) {
  auto unbiased = r.flag(1, "unbiased", true);
  if (!unbiased) return false;
  return variance(r, r.tensor(0, "self"), {}, *unbiased ? 1.0 : 0.0, false, root, false);
}

bool var_correction_op(Rewrite& r) { return var_correction(r, false, false); }
bool std_correction_op(Rewrite& r) { return var_correction(r, true, false); }
bool var_mean_correction_op(Rewrite& r) { return var_correction(r, false, true); }
bool var_dim_op(Rewrite& r) { return var_dim(r, false); }
bool std_dim_op(Rewrite& r) { return var_dim(r, true); }
bool var_all_op(Rewrite& r) { return var_all(r, false); }
bool std_all_op(Rewrite& r) { return var_all(r, true); }

// ----- matrix products: mm stays extern, the epilogue becomes primitives

Value* matrix_product(Rewrite& r, Value* a, Value* b) {
  const TensorMeta& ma = *a->meta();
  const TensorMeta& mb = *b->meta();
  TensorMeta out = TensorMeta::contiguous(ma.dtype, {ma.sizes[0], mb.sizes[1]}, ma.device,
                                          ma.requires_grad || mb.requires_grad);
  return r.b.node("aten::mm", {a, b}, {ValueType::tensor(out)})->output();
}

bool is_matrix(const Value* v) { return v != nullptr && v->meta()->dim() == 2; }

bool baddbmm(Rewrite& r) {
  Value* bias = r.tensor(0, "self");
  Value* b1 = r.tensor(1, "batch1");
  Value* b2 = r.tensor(2, "batch2");
  auto beta = r.scalar(3, "beta", Argument::integer(1));
  auto alpha = r.scalar(4, "alpha", Argument::integer(1));
  if (bias == nullptr || b1 == nullptr || b2 == nullptr || b1->meta()->dim() != 3 ||
      b2->meta()->dim() != 3 || !beta || !alpha) {
    return false;
  }
  const TensorMeta& m1 = *b1->meta();
  TensorMeta out =
      TensorMeta::contiguous(m1.dtype, {m1.sizes[0], m1.sizes[1], b2->meta()->sizes[2]}, m1.device,
                             m1.requires_grad || b2->meta()->requires_grad);
  Value* product = r.b.node("aten::bmm", {b1, b2}, {ValueType::tensor(out)})->output();
  if (!is_one(*alpha)) product = r.b.binary("aten::mul.Scalar", product, *alpha);
  if (is_zero(*beta)) {
    r.results[0] = product;
    return true;
  }
  Value* addend = is_one(*beta) ? bias : r.b.binary("aten::mul.Scalar", bias, *beta);
  r.results[0] = r.b.binary("aten::add.Tensor", product, addend);
  return true;
}

bool addmm(Rewrite& r) {
  Value* bias = r.tensor(0, "self");
  Value* m1 = r.tensor(1, "mat1");
  Value* m2 = r.tensor(2, "mat2");
  auto beta = r.scalar(3, "beta", Argument::integer(1));
  auto alpha = r.scalar(4, "alpha", Argument::integer(1));
  if (bias == nullptr || !is_matrix(m1) || !is_matrix(m2) || !beta || !alpha) return false;
  Value* product = matrix_product(r, m1, m2);
  if (!is_one(*alpha)) product = r.b.binary("aten::mul.Scalar", product, *alpha);
  if (is_zero(*beta)) {
    r.results[0] = product;
    return true;
  }
  Value* addend = is_one(*beta) ? bias : r.b.binary("aten::mul.Scalar", bias, *beta);
  r.results[0] = r.b.binary("aten::add.Tensor", product, addend);
  return true;
}

bool linear(Rewrite& r) {
  Value* x = r.tensor(0, "input");
  Value* weight = r.tensor(1, "weight");
  Value* bias = r.tensor(2, "bias");
  if (x == nullptr || !is_matrix(weight) || x->meta()->dim() == 0) return false;
  const std::vector<int64_t>& sizes = x->meta()->sizes;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) rows *= sizes[i];
  Value* flat = r.b.reshape(x, {rows, sizes.back()});
  Value* product = matrix_product(r, flat, r.b.unary("aten::t", weight));
  std::vector<int64_t> out_sizes(sizes.begin(), sizes.end() - 1);
  out_sizes.push_back(weight->meta()->sizes[0]);
  Value* y = r.b.reshape(product, out_sizes);
  if (bias != nullptr) y = r.b.binary("aten::add.Tensor", y, bias);
  r.results[0] = y;
  return true;
}

// ----- identities and shape-only ops

// Whether `x` is a fresh tensor nobody else can see: made by a node that neither views
// nor writes its inputs, not returned, and read by no operator that could alias it.
bool is_private_temporary(const Value* x) {
  const Node* producer = x->producer();
  if (producer == nullptr || x->num_output_uses() > 0) return false;
  OpProperties props = op_properties(producer->op());
  if (!props.is_pure() || props.may_alias_input()) return false;
  for (const Node* user : x->users()) {
    if (op_properties(user->op()).may_alias_input()) return false;
  }
  return true;
}

// Whether `user` reads a tensor argument through its strides whatever they are: fused
// primitives, and the scatters functionalize makes (they copy their source). Other
// operators run through ATen, whose composites may have made an input contiguous for a
// kernel that needs it.
bool reads_any_layout(const Node& user) {
  if (primitive_kind(user) != PrimitiveKind::Extern) return true;
  return user.op() == "aten::slice_scatter" || user.op() == "aten::select_scatter";
}

// max_pool2d_with_indices whose indices nothing reads, in inference: the max_pool2d
// primitive, which fused kernels compute without writing indices. Under autograd the
// backward needs the indices the forward gives (graph/autodiff.h).
bool max_pool_without_indices(Rewrite& r) {
  if (r.node.num_outputs() != 2 || r.output_used(1) || r.out_meta(0).requires_grad) return false;
  std::vector<Argument> args(r.node.args().begin(), r.node.args().end());
  if (!max_pool_window(args, r.node.kwargs())) return false;
  r.results[0] = r.b.primitive("aten::max_pool2d", std::move(args), r.node.kwargs());
  return true;
}

// clone, contiguous, alias, detach: the value itself, unless the caller receives the
// result and could tell (then it must stay a tensor of its own): returning a private
// temporary instead of its copy is fine.
bool identity_unless_returned(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr || r.graph_mutates) return false;
  const graph::Value* out = r.node.outputs().empty() ? nullptr : r.node.outputs()[0];
  bool changes_layout =
      out != nullptr && out->meta() && x->meta() && out->meta()->strides != x->meta()->strides;
  // The caller would see the other layout: contiguous() of a permuted temporary returned
  // non-contiguous fails its view(-1).
  if (r.any_output_returned() && (!is_private_temporary(x) || changes_layout ||
                                  r.node.op() == "aten::alias" || r.node.op() == "aten::detach")) {
    return false;
  }
  // A copy that changes the layout (contiguous() of a transpose) must stay when a view of
  // it follows, since a view's strides come from its input's, and when a user may need
  // that layout (embedding_bag's indices.contiguous() for _embedding_bag_forward_only).
  if (changes_layout) {
    for (const Node* user : out->users()) {
      if (op_properties(user->op()).may_alias_input() || !reads_any_layout(*user)) return false;
    }
  }
  r.results[0] = x;
  return true;
}

bool dropout(Rewrite& r) {
  Value* x = r.tensor(0, "input");
  auto train = r.flag(2, "train", true);
  if (x == nullptr || !train || *train) return false;
  r.results[0] = x;
  return true;
}

// native_dropout outside training: the input (where the caller cannot tell), with the
// mask (output 1) unused.
bool native_dropout(Rewrite& r) {
  auto train = r.flag(2, "train", true);
  if (!train || *train || r.output_used(1)) return false;
  return identity_unless_returned(r);
}

bool to_dtype(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  const Argument* dtype = r.arg(1, "dtype");
  auto copy = r.flag(3, "copy", false);
  if (x == nullptr || dtype == nullptr || dtype->kind() != Argument::Kind::DType || !copy) {
    return false;
  }
  if (dtype->as_dtype() == x->meta()->dtype && !*copy) return identity_unless_returned(r);
  r.results[0] = r.b.primitive("aten::_to_copy", {x}, {{"dtype", *dtype}});
  return true;
}

// Views whose result is fully described by the output sizes: a reshape to them.
bool reshape_to_output(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr) return false;
  r.results[0] = r.b.primitive("aten::reshape", {x, Argument::int_list(r.out_meta(0).sizes)});
  return true;
}

bool expand_as(Rewrite& r) {
  Value* x = r.tensor(0, "self");
  if (x == nullptr) return false;
  r.results[0] = r.b.primitive("aten::expand", {x, Argument::int_list(r.out_meta(0).sizes)});
  return true;
}

using Decomposition = bool (*)(Rewrite&);

// X(operator, decomposition): the one table of decompositions.
#define DYNVM_DECOMPOSITIONS(X)                                           \
  X("aten::gelu", gelu)                                                   \
  X("aten::silu", silu)                                                   \
  X("aten::hardsigmoid", hardsigmoid)                                     \
  X("aten::hardswish", hardswish)                                         \
  X("aten::hardtanh", hardtanh)                                           \
  X("aten::relu6", relu6)                                                 \
  X("aten::leaky_relu", leaky_relu)                                       \
  X("aten::softplus", softplus)                                           \
  X("aten::mish", mish)                                                   \
  X("aten::elu", elu)                                                     \
  X("aten::rsub.Scalar", rsub_scalar)                                     \
  X("aten::rsub.Tensor", rsub_tensor)                                     \
  X("aten::square", square)                                               \
  X("aten::addcmul", addcmul)                                             \
  X("aten::addcdiv", addcdiv)                                             \
  X("aten::lerp.Scalar", lerp_scalar)                                     \
  X("aten::lerp.Tensor", lerp_tensor)                                     \
  X("aten::clamp_min", clamp_min)                                         \
  X("aten::clamp_max", clamp_max)                                         \
  X("aten::clamp_min.Tensor", clamp_min_tensor)                           \
  X("aten::clamp_max.Tensor", clamp_max_tensor)                           \
  X("aten::glu", glu)                                                     \
  X("aten::full_like", full_like)                                         \
  X("aten::zeros_like", zeros_like_op)                                    \
  X("aten::ones_like", ones_like_op)                                      \
  X("aten::masked_fill.Scalar", masked_fill_scalar)                       \
  X("aten::masked_fill.Tensor", masked_fill_tensor)                       \
  X("aten::where.ScalarOther", where_scalar_other)                        \
  X("aten::where.ScalarSelf", where_scalar_self)                          \
  X("aten::threshold", threshold)                                         \
  X("aten::log_sigmoid_forward", log_sigmoid_forward)                     \
  X("aten::native_layer_norm", native_layer_norm)                         \
  X("aten::layer_norm", native_layer_norm)                                \
  X("aten::native_batch_norm", native_batch_norm)                         \
  X("aten::_native_batch_norm_legit_no_training", batch_norm_no_training) \
  X("aten::cudnn_batch_norm", vendor_batch_norm)                          \
  X("aten::miopen_batch_norm", vendor_batch_norm)                         \
  X("aten::_native_batch_norm_legit", native_batch_norm)                  \
  X("aten::_native_batch_norm_legit.no_stats", batch_norm_no_stats)       \
  X("aten::native_group_norm", native_group_norm)                         \
  X("aten::_softmax", softmax_internal)                                   \
  X("aten::softmax.int", softmax_int)                                     \
  X("aten::_log_softmax", log_softmax_internal)                           \
  X("aten::log_softmax.int", log_softmax_int)                             \
  X("aten::logsumexp", logsumexp)                                         \
  X("aten::mean.dim", mean_dim)                                           \
  X("aten::mean", mean_all)                                               \
  X("aten::sum", sum_all)                                                 \
  X("aten::var.correction", var_correction_op)                            \
  X("aten::var.dim", var_dim_op)                                          \
  X("aten::var", var_all_op)                                              \
  X("aten::std.correction", std_correction_op)                            \
  X("aten::std.dim", std_dim_op)                                          \
  X("aten::std", std_all_op)                                              \
  X("aten::var_mean.correction", var_mean_correction_op)                  \
  X("aten::dropout", dropout)                                             \
  X("aten::addmm", addmm)                                                 \
  X("aten::baddbmm", baddbmm)                                             \
  X("aten::native_dropout", native_dropout)                               \
  X("aten::linear", linear)                                               \
  X("aten::max_pool2d_with_indices", max_pool_without_indices)            \
  X("aten::clone", identity_unless_returned)                              \
  X("aten::contiguous", identity_unless_returned)                         \
  X("aten::alias", identity_unless_returned)                              \
  X("aten::detach", identity_unless_returned)                             \
  X("aten::lift_fresh", identity_unless_returned)                         \
  X("aten::to.dtype", to_dtype)                                           \
  X("aten::_unsafe_view", reshape_to_output)                              \
  X("aten::_reshape_alias", reshape_to_output)                            \
  X("aten::flatten.using_ints", reshape_to_output)                        \
  X("aten::squeeze", reshape_to_output)                                   \
  X("aten::squeeze.dims", reshape_to_output)                              \
  X("aten::view_as", reshape_to_output)                                   \
  X("aten::expand_as", expand_as)

Decomposition find_decomposition(std::string_view op) {
#define DYNVM_DECOMPOSITION_FIND(name, function) \
  if (op == name) return &function;
  DYNVM_DECOMPOSITIONS(DYNVM_DECOMPOSITION_FIND)
#undef DYNVM_DECOMPOSITION_FIND
  return nullptr;
}

// `v` with the dtype and sizes of `want`; a fresh (non-view) result built by this
// rewrite (node id from `first_new_node` on) also takes its strides and requires_grad,
// so consumers see the type the node had.
Value* conform(NodeBuilder& b, Value* v, const TensorMeta& want, size_t first_new_node) {
  v = b.reshape(b.convert(v, want.dtype), want.sizes);
  Node* producer = v->producer();
  if (producer != nullptr && producer->id() >= first_new_node &&
      primitive_kind(producer->op()) != PrimitiveKind::View && producer->op() != "aten::mm") {
    v->set_type(ValueType::tensor(want));
  }
  return v;
}

bool has_tensor_metadata(const Node& node) {
  for (const Value* out : node.outputs()) {
    if (out->kind() != ValueKind::Tensor || out->meta() == nullptr) return false;
  }
  bool ok = true;
  node.for_each_input([&](const Value* v) {
    if (v->kind() == ValueKind::Tensor && v->meta() == nullptr) ok = false;
  });
  return ok && node.num_outputs() > 0;
}

// Whether a node writes a tensor before the trailing write-back block that
// functionalization leaves (copies into graph inputs, views of their results), which
// only writes inputs after everything else has read them (node_may_write: eval-mode
// batch_norm writes nothing; an opaque operator may write any tensor it is given).
bool writes_tensors_before_write_back(const std::vector<Node*>& nodes) {
  size_t end = nodes.size();
  while (end > 0) {
    const Node* node = nodes[end - 1];
    bool write_back = node->op() == "aten::copy_" && !node->args().empty() &&
                      node->arg(0).is_value() && node->arg(0).as_value()->is_input();
    if (!write_back && !op_properties(node->op()).is_view()) break;
    --end;
  }
  for (size_t i = 0; i < end; ++i) {
    if (node_may_write(*nodes[i])) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string_view> decomposed_ops() {
  return {
#define DYNVM_DECOMPOSITION_NAME(name, function) name,
      DYNVM_DECOMPOSITIONS(DYNVM_DECOMPOSITION_NAME)
#undef DYNVM_DECOMPOSITION_NAME
  };
}

void decompose(Graph& graph) {
  std::vector<Node*> nodes;
  for (Node* node : graph.nodes()) nodes.push_back(node);
  bool graph_mutates = writes_tensors_before_write_back(nodes);
  for (Node* node : nodes) {
    Decomposition decomposition = find_decomposition(node->op());
    if (decomposition == nullptr || !has_tensor_metadata(*node)) continue;
    size_t first_new_node = graph.num_node_ids();
    Node* before_first = node->prev();
    NodeBuilder builder(graph, node);
    std::vector<Value*> results(node->num_outputs(), nullptr);
    Rewrite rewrite{*node, builder, results, graph_mutates};
    bool applied = false;
    try {
      applied = decomposition(rewrite);
    } catch (const InternalError&) {
      // Arguments the primitives reject (sizes that do not broadcast, a dtype the rules
      // do not cover): keep the node, an extern call, rather than fail the compilation.
      applied = false;
    }
    for (size_t i = 0; applied && i < results.size(); ++i) {
      if (results[i] == nullptr && node->output(i)->has_uses()) applied = false;
    }
    if (!applied) {
      // Drop whatever was built before the decomposition gave up.
      std::vector<Node*> built;
      for (Node* n = before_first == nullptr ? graph.first_node() : before_first->next(); n != node;
           n = n->next()) {
        built.push_back(n);
      }
      for (auto it = built.rbegin(); it != built.rend(); ++it) graph.remove(*it);
      continue;
    }
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i] == nullptr) continue;
      Value* result = conform(builder, results[i], *node->output(i)->meta(), first_new_node);
      graph.replace_all_uses_with(node->output(i), result);
    }
    graph.remove(node);
  }
}

}  // namespace dynvm::graph
