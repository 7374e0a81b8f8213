// derive_joint_graph: the forward graph followed by its backward, built from one
// derivative rule per operator.
#include "dynvm/graph/autodiff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>

#include "dynvm/graph/check.h"
#include "dynvm/graph/node_builder.h"
#include "dynvm/graph/op_properties.h"

namespace dynvm::graph {

namespace {

// Thrown by a rule that meets a form of its operator it does not handle.
struct NoRule {
  std::string why;
};

Argument real(double v) { return Argument::real(v); }

const Argument* argument(const Node& node, size_t index, std::string_view name) {
  if (index < node.args().size()) return &node.arg(index);
  return node.kwarg(name);
}

int64_t int_argument(const Node& node, size_t index, std::string_view name, int64_t fallback) {
  const Argument* a = argument(node, index, name);
  if (a == nullptr || a->is_none()) return fallback;
  if (a->kind() != Argument::Kind::Int) throw NoRule{"a non-constant integer argument"};
  return a->as_int();
}

bool bool_argument(const Node& node, size_t index, std::string_view name, bool fallback) {
  const Argument* a = argument(node, index, name);
  if (a == nullptr || a->is_none()) return fallback;
  if (a->kind() != Argument::Kind::Bool) throw NoRule{"a non-constant flag"};
  return a->as_bool();
}

std::vector<int64_t> int_list(const Argument& a) {
  std::vector<int64_t> out;
  if (a.kind() == Argument::Kind::Int) return {a.as_int()};
  if (!a.is_list()) throw NoRule{"a non-constant integer list"};
  for (const Argument& item : a.as_list()) {
    if (item.kind() != Argument::Kind::Int) throw NoRule{"a non-constant integer list"};
    out.push_back(item.as_int());
  }
  return out;
}

int64_t wrap_dim(int64_t d, size_t rank) {
  int64_t n = std::max<int64_t>(static_cast<int64_t>(rank), 1);
  return d < 0 ? d + n : d;
}

const TensorMeta& meta(const Value* v) {
  DYNVM_GRAPH_CHECK(v->meta() != nullptr, "autodiff: a tensor value without metadata");
  return *v->meta();
}

Value* tensor_argument(const Node& node, size_t index, std::string_view name) {
  const Argument* a = argument(node, index, name);
  if (a == nullptr || !a->is_value() || a->as_value()->kind() != ValueKind::Tensor) {
    return nullptr;
  }
  return a->as_value();
}

class Differentiator {
 public:
  explicit Differentiator(Graph& graph) : graph_(graph), b_(graph, nullptr) {}

  // Marks the values that need a gradient, forward from the inputs that require grad.
  void mark_needed(const std::vector<size_t>& grad_inputs) {
    needs_.assign(graph_.num_values(), false);
    for (size_t i : grad_inputs) needs_[graph_.inputs()[i]->id()] = true;
    for (const Node* node : graph_.nodes()) {
      bool any = false;
      node->for_each_input([&](const Value* v) { any = any || needs(v); });
      if (!any || gives_no_gradient(node->op())) continue;
      for (const Value* out : node->outputs()) {
        // (A tensor without metadata, an undefined result or random state, has none.)
        if (out->kind() == ValueKind::Tensor && out->meta() != nullptr &&
            is_floating(out->meta()->dtype)) {
          needs_[out->id()] = true;
        }
      }
    }
  }

  bool needs(const Value* v) const { return v->id() < needs_.size() && needs_[v->id()]; }

  // Finds the softmax shifts (is_softmax_shift) while the graph holds only the forward:
  // the backward's nodes read the same values.
  void find_softmax_shifts() {
    shift_.assign(graph_.num_node_ids(), false);
    for (const Node* node : graph_.nodes()) shift_[node->id()] = is_softmax_shift(*node);
  }

  // Operators whose outputs do not depend differentiably on their inputs: fills and
  // random draws shaped like a tensor (dropout's mask on the CPU: empty_like, bernoulli).
  static bool gives_no_gradient(std::string_view op) {
    auto name = parse_op_name(op);
    if (!name) return false;
    std::string_view base = name->base;
    if (base.ends_with("_")) base.remove_suffix(1);
    for (std::string_view fill : {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
                                  "randn_like", "randint_like", "bernoulli", "new_empty",
                                  "new_zeros", "new_ones", "new_full", "empty_strided", "detach"}) {
      if (base == fill) return true;
    }
    return false;
  }

  void seed(const Value* v, Value* tangent) { accumulate_exact(v, tangent); }

  Value* grad(const Value* v) const { return v->id() < grads_.size() ? grads_[v->id()] : nullptr; }

  // Applies the rule of `node`, whose outputs' gradients are known (some may be absent).
  void differentiate(const Node& node) {
    if (node.id() < shift_.size() && shift_[node.id()]) return;  // zero in exact arithmetic
    bool any_input = false;
    node.for_each_input([&](const Value* v) { any_input = any_input || needs(v); });
    bool any_grad = false;
    for (const Value* out : node.outputs()) any_grad = any_grad || grad(out) != nullptr;
    if (!any_input || !any_grad) return;
    if (!rule(node)) throw NoRule{"no derivative rule for " + node.op()};
  }

 private:
  // The max that softmax and log_softmax subtract before exp (decompose.cpp's form):
  // m = amax(x, dims, keepdim) read only by s = x - m, s read only by exp(s) (and, for
  // log_softmax, by s - log(t)), exp(s) only by t = sum(exp(s), dims, keepdim) and
  // exp(s) / t, t only by that division and log(t), log(t) only by s - log(t). The result
  // does not change when m does, so m's gradient is zero: differentiating through it would
  // add a mask, a count and a division per element that only add rounding.
  static bool is_softmax_shift(const Node& node) {
    if (node.op() != "aten::amax" || node.num_outputs() != 1) return false;
    const Value* x = node.arg(0).as_value();
    const Value* m = node.output();
    auto only = [](const Value* v, const std::function<bool(const Node&)>& ok) {
      if (v->num_output_uses() > 0 || v->users().empty()) return false;
      for (const Node* user : v->users()) {
        if (!ok(*user)) return false;
      }
      return true;
    };
    auto reads = [](const Node& n, size_t i, const Value* v) {
      return i < n.args().size() && n.arg(i).is_value() && n.arg(i).as_value() == v;
    };
    return only(m, [&](const Node& sub) {
      if (sub.op() != "aten::sub.Tensor" || !reads(sub, 0, x) || !reads(sub, 1, m) ||
          sub.args().size() > 2 || !sub.kwargs().empty()) {
        return false;
      }
      const Value* s = sub.output();
      const Value* exps = nullptr;
      const Value* log_total = nullptr;
      bool shift_ok = only(s, [&](const Node& u) {
        if (u.op() == "aten::exp" && reads(u, 0, s)) return (exps = u.output()) != nullptr;
        if (u.op() == "aten::sub.Tensor" && reads(u, 0, s) && u.args().size() == 2 &&
            u.kwargs().empty() && u.arg(1).is_value()) {
          log_total = u.arg(1).as_value();
          return true;
        }
        return false;
      });
      if (!shift_ok || exps == nullptr) return false;
      const Value* total = nullptr;
      bool exps_ok = only(exps, [&](const Node& u) {
        if (u.op() == "aten::sum.dim_IntList" && reads(u, 0, exps) && u.args().size() > 1 &&
            u.arg(1) == node.arg(1)) {
          return (total = u.output()) != nullptr;
        }
        const Value* d =
            u.args().size() == 2 && u.arg(1).is_value() ? u.arg(1).as_value() : nullptr;
        return u.op() == "aten::div.Tensor" && reads(u, 0, exps) && d != nullptr &&
               d->producer() != nullptr && d->producer()->op() == "aten::sum.dim_IntList" &&
               reads(*d->producer(), 0, exps);
      });
      if (!exps_ok || total == nullptr) return false;
      if (log_total != nullptr) {
        const Node* log = log_total->producer();
        if (log == nullptr || log->op() != "aten::log" || !reads(*log, 0, total) ||
            log_total->users().size() != 1 || log_total->num_output_uses() > 0) {
          return false;
        }
      }
      return only(total, [&](const Node& u) {
        if (u.op() == "aten::div.Tensor") return reads(u, 0, exps) && reads(u, 1, total);
        return u.op() == "aten::log" && u.output() == log_total;
      });
    });
  }

  // --- building blocks
  Value* un(const char* op, Value* x) { return b_.unary(op, x); }
  Value* bin(const char* op, Argument a, Argument c) { return b_.binary(op, std::move(a), c); }
  Value* mul(Argument a, Argument c) {
    bool tensor = c.is_value() && c.as_value()->kind() == ValueKind::Tensor;
    return bin(tensor ? "aten::mul.Tensor" : "aten::mul.Scalar", std::move(a), std::move(c));
  }
  Value* div(Value* a, Argument c) {
    bool tensor = c.is_value() && c.as_value()->kind() == ValueKind::Tensor;
    return bin(tensor ? "aten::div.Tensor" : "aten::div.Scalar", a, std::move(c));
  }
  Value* as_dtype_of(Value* mask, const Value* like) { return b_.convert(mask, meta(like).dtype); }
  Value* zeros_like(Value* like) { return b_.zeros_like(like, meta(like).dtype); }
  Value* where(Value* condition, Value* a, Value* c) {
    return b_.primitive("aten::where.self", {condition, a, c});
  }

  // `g` summed over the dimensions broadcasting added to `x`, reshaped and converted to it.
  Value* reduce_to(Value* g, const TensorMeta& x) {
    const std::vector<int64_t>& gs = meta(g).sizes;
    if (gs != x.sizes) {
      if (gs.size() < x.sizes.size()) throw NoRule{"a gradient of lower rank than its input"};
      size_t lead = gs.size() - x.sizes.size();
      std::vector<int64_t> dims;
      for (size_t d = 0; d < gs.size(); ++d) {
        if (d < lead || (x.sizes[d - lead] == 1 && gs[d] != 1)) {
          dims.push_back(static_cast<int64_t>(d));
        }
      }
      if (!dims.empty()) g = b_.sum(g, dims, true);
      g = b_.reshape(g, x.sizes);
    }
    return b_.convert(g, x.dtype);
  }

  void accumulate_exact(const Value* v, Value* g) {
    if (grads_.size() <= v->id()) grads_.resize(v->id() + 1, nullptr);
    Value*& slot = grads_[v->id()];
    slot = slot == nullptr ? g : bin("aten::add.Tensor", slot, g);
  }

  // Adds `g` to the gradient of `x` when x needs one.
  void add(const Value* x, Value* g) {
    if (x == nullptr || !needs(x)) return;
    accumulate_exact(x, reduce_to(g, meta(x)));
  }
  void add_argument(const Node& node, size_t index, Value* g) {
    if (index < node.args().size() && node.arg(index).is_value())
      add(node.arg(index).as_value(), g);
  }

  Value* x_of(const Node& node) { return node.arg(0).as_value(); }

  Value* alpha_times(const Node& node, Value* g) {
    const Argument* alpha = node.kwarg("alpha");
    if (alpha == nullptr && node.args().size() > 2) alpha = &node.arg(2);
    if (alpha == nullptr || alpha->is_none()) return g;
    if ((alpha->kind() == Argument::Kind::Int && alpha->as_int() == 1) ||
        (alpha->kind() == Argument::Kind::Double && alpha->as_double() == 1.0)) {
      return g;
    }
    return mul(g, *alpha);
  }

  // Gradient of a reduction's output, unreduced to `x`'s shape: reshaped to keepdim sizes
  // and expanded.
  Value* unreduce(Value* g, const Node& node, const TensorMeta& x, bool keepdim) {
    if (!keepdim) {
      std::vector<int64_t> dims = reduced_dims(node, x);
      std::vector<int64_t> sizes = x.sizes;
      for (int64_t d : dims) sizes[static_cast<size_t>(d)] = 1;
      g = b_.reshape(g, sizes);
    }
    return b_.primitive("aten::expand", {g, Argument::int_list(x.sizes)});
  }

  static std::vector<int64_t> reduced_dims(const Node& node, const TensorMeta& x) {
    const Argument* dims = argument(node, 1, "dim");
    std::vector<int64_t> out;
    if (dims == nullptr || dims->is_none() || (dims->is_list() && dims->as_list().empty())) {
      for (size_t d = 0; d < x.dim(); ++d) out.push_back(static_cast<int64_t>(d));
      return out;
    }
    for (int64_t d : int_list(*dims)) out.push_back(wrap_dim(d, x.dim()));
    return out;
  }

  Node* extern_node(const char* op, std::vector<Argument> args, std::vector<TensorMeta> outs) {
    std::vector<ValueType> types;
    for (TensorMeta& m : outs) {
      m.strides = row_major_strides(m.sizes);
      m.requires_grad = false;
      types.push_back(ValueType::tensor(std::move(m)));
    }
    return b_.node(op, std::move(args), std::move(types));
  }

  Value* transpose_last(Value* x) {
    int64_t r = static_cast<int64_t>(meta(x).dim());
    return b_.primitive("aten::transpose.int",
                        {x, Argument::integer(r - 2), Argument::integer(r - 1)});
  }

  Value* matmul(const char* op, Value* a, Value* c) {
    TensorMeta m = meta(a);
    m.sizes.back() = meta(c).sizes.back();
    m.dtype = meta(a).dtype;
    return extern_node(op, {a, c}, {m})->output();
  }

  // --- the rules; false: no rule for this operator
  bool rule(const Node& node) {
    const std::string& op = node.op();
    Value* out = node.output(0);
    if (op == "aten::split.Tensor" || op == "aten::split_with_sizes" || op == "aten::chunk" ||
        op == "aten::unbind.int") {
      return pieces(node, op);
    }
    Value* g = grad(out);
    if (g == nullptr) throw NoRule{"a gradient for a secondary output of " + op};
    if (primitive_rule(node, op, out, g)) return true;
    return extern_rule(node, op, g);
  }

  bool primitive_rule(const Node& node, const std::string& op, Value* out, Value* g) {
    Value* x = node.args().empty() || !node.arg(0).is_value() ? nullptr : x_of(node);
    if (op == "aten::neg") {
      add(x, un("aten::neg", g));
    } else if (op == "aten::exp") {
      add(x, mul(g, out));
    } else if (op == "aten::log") {
      add(x, div(g, x));
    } else if (op == "aten::tanh") {
      add(x, mul(g, bin("aten::add.Scalar", un("aten::neg", mul(out, out)), real(1.0))));
    } else if (op == "aten::erf") {
      Value* bell = un("aten::exp", un("aten::neg", mul(x, x)));
      add(x, mul(g, mul(bell, real(M_2_SQRTPI))));
    } else if (op == "aten::sigmoid") {
      Value* slope = mul(out, bin("aten::add.Scalar", un("aten::neg", out), real(1.0)));
      add(x, mul(g, slope));
    } else if (op == "aten::sqrt") {
      add(x, div(g, mul(out, real(2.0))));
    } else if (op == "aten::rsqrt") {
      add(x, mul(g, mul(mul(out, mul(out, out)), real(-0.5))));
    } else if (op == "aten::abs") {
      // One node per statement here and below wherever two arguments would make nodes:
      // the order C++ evaluates arguments in differs between compilers, and the graph's
      // node order must not.
      Value* positive = as_dtype_of(bin("aten::gt.Scalar", x, real(0)), g);
      Value* negative = as_dtype_of(bin("aten::lt.Scalar", x, real(0)), g);
      add(x, mul(g, bin("aten::sub.Tensor", positive, negative)));
    } else if (op == "aten::relu") {
      Value* alive = bin("aten::gt.Scalar", out, real(0));
      add(x, where(alive, g, zeros_like(g)));
    } else if (op == "aten::reciprocal") {
      add(x, un("aten::neg", mul(g, mul(out, out))));
    } else if (op == "aten::sin") {
      add(x, mul(g, un("aten::cos", x)));
    } else if (op == "aten::cos") {
      add(x, un("aten::neg", mul(g, un("aten::sin", x))));
    } else if (op == "aten::log1p") {
      add(x, div(g, bin("aten::add.Scalar", x, real(1.0))));
    } else if (op == "aten::expm1") {
      add(x, mul(g, bin("aten::add.Scalar", out, real(1.0))));
    } else if (op == "aten::add.Tensor") {
      add(x, g);
      add_argument(node, 1, alpha_times(node, g));
    } else if (op == "aten::sub.Tensor") {
      add(x, g);
      add_argument(node, 1, un("aten::neg", alpha_times(node, g)));
    } else if (op == "aten::add.Scalar" || op == "aten::sub.Scalar") {
      add(x, g);
    } else if (op == "aten::mul.Tensor") {
      add(x, mul(g, node.arg(1)));
      add_argument(node, 1, mul(g, x));
    } else if (op == "aten::mul.Scalar") {
      add(x, mul(g, node.arg(1)));
    } else if (op == "aten::div.Tensor" || op == "aten::div.Scalar") {
      if (const Argument* mode = node.kwarg("rounding_mode"); mode != nullptr && !mode->is_none()) {
        throw NoRule{"division with a rounding mode"};
      }
      add(x, div(g, node.arg(1)));
      if (op == "aten::div.Tensor") {
        add_argument(node, 1, un("aten::neg", div(mul(g, out), node.arg(1))));
      }
    } else if (op == "aten::pow.Tensor_Scalar") {
      const Argument& e = node.arg(1);
      double exponent = e.kind() == Argument::Kind::Int ? static_cast<double>(e.as_int())
                        : e.kind() == Argument::Kind::Double
                            ? e.as_double()
                            : throw NoRule{"a non-constant exponent"};
      Value* power =
          exponent == 2.0 ? x : b_.primitive("aten::pow.Tensor_Scalar", {x, real(exponent - 1.0)});
      add(x, exponent == 0.0 ? zeros_like(g) : mul(mul(g, power), real(exponent)));
    } else if (op == "aten::pow.Scalar") {
      // d(b ** e)/de = b ** e * log(b).
      const Argument& b = node.arg(0);
      double base = b.kind() == Argument::Kind::Int      ? static_cast<double>(b.as_int())
                    : b.kind() == Argument::Kind::Double ? b.as_double()
                                                         : throw NoRule{"a non-real base"};
      // (ATen's gradient is 0 where the base is 0; log(0) would make it NaN.)
      if (base <= 0.0) throw NoRule{"a base that is not positive"};
      add_argument(node, 1, mul(mul(g, out), real(std::log(base))));
    } else if (op == "aten::maximum" || op == "aten::minimum") {
      Value* a = x;
      Value* c = node.arg(1).as_value();
      const char* wins = op == "aten::maximum" ? "aten::gt.Tensor" : "aten::lt.Tensor";
      Value* tie = mul(as_dtype_of(bin("aten::eq.Tensor", a, c), g), real(0.5));
      add(a, mul(g, bin("aten::add.Tensor", as_dtype_of(bin(wins, a, c), g), tie)));
      add(c, mul(g, bin("aten::add.Tensor", as_dtype_of(bin(wins, c, a), g), tie)));
    } else if (op == "aten::where.self") {
      Value* condition = x;
      Value* zero = zeros_like(g);
      add_argument(node, 1, where(condition, g, zero));
      add_argument(node, 2, where(condition, zero, g));
    } else if (op == "aten::clamp") {
      const Argument* lo = argument(node, 1, "min");
      const Argument* hi = argument(node, 2, "max");
      Value* inside = nullptr;
      auto both = [&](Value* mask) {
        inside = inside == nullptr ? mask : bin("aten::logical_and", inside, mask);
      };
      for (auto [bound, compare] :
           {std::pair{lo, "aten::ge.Scalar"}, std::pair{hi, "aten::le.Scalar"}}) {
        if (bound == nullptr || bound->is_none()) continue;
        if (bound->is_value() && bound->as_value()->kind() == ValueKind::Tensor) {
          throw NoRule{"clamp with tensor bounds"};
        }
        both(bin(compare, x, *bound));
      }
      add(x, inside == nullptr ? g : where(inside, g, zeros_like(g)));
    } else if (op == "aten::_to_copy") {
      if (meta(x).device != meta(out).device) throw NoRule{"a copy across devices"};
      add(x, g);
    } else if (op == "aten::sum.dim_IntList") {
      add(x, unreduce(g, node, meta(x), bool_argument(node, 2, "keepdim", false)));
    } else if (op == "aten::amax" || op == "aten::amin") {
      bool keepdim = bool_argument(node, 2, "keepdim", false);
      Value* best = unreduce(out, node, meta(x), keepdim);
      Value* hit = as_dtype_of(bin("aten::eq.Tensor", x, best), g);
      std::vector<int64_t> dims = reduced_dims(node, meta(x));
      Value* count = b_.sum(hit, dims, true);
      Value* share = div(unreduce(g, node, meta(x), keepdim), count);
      add(x, mul(share, hit));
    } else if (op == "aten::clone" || op == "aten::contiguous" || op == "aten::alias" ||
               op == "aten::lift_fresh") {
      add(x, g);
    } else if (op == "aten::view" || op == "aten::reshape" || op == "aten::unsqueeze" ||
               op == "aten::squeeze.dim" || op == "aten::squeeze" || op == "aten::squeeze.dims" ||
               op == "aten::_unsafe_view" || op == "aten::_reshape_alias" ||
               op == "aten::flatten.using_ints" || op == "aten::unflatten.int" ||
               op == "aten::view_as") {
      add(x, b_.reshape(g, meta(x).sizes));
    } else if (op == "aten::expand") {
      add(x, g);  // reduce_to sums over what expand broadcast
    } else if (op == "aten::permute") {
      std::vector<int64_t> dims = int_list(node.arg(1));
      std::vector<int64_t> inverse(dims.size());
      for (size_t i = 0; i < dims.size(); ++i) {
        inverse[static_cast<size_t>(wrap_dim(dims[i], dims.size()))] = static_cast<int64_t>(i);
      }
      add(x, b_.primitive("aten::permute", {g, Argument::int_list(inverse)}));
    } else if (op == "aten::t") {
      add(x, meta(g).dim() < 2 ? g : b_.unary("aten::t", g));
    } else if (op == "aten::transpose.int") {
      add(x, b_.primitive("aten::transpose.int", {g, node.arg(1), node.arg(2)}));
    } else if (op == "aten::slice.Tensor") {
      int64_t dim = wrap_dim(int_argument(node, 1, "dim", 0), meta(x).dim());
      int64_t start = int_argument(node, 2, "start", 0);
      int64_t end = int_argument(node, 3, "end", INT64_MAX);
      int64_t step = int_argument(node, 4, "step", 1);
      add(x,
          extern_node("aten::slice_backward",
                      {g, Argument::int_list(meta(x).sizes), Argument::integer(dim),
                       Argument::integer(start), Argument::integer(end), Argument::integer(step)},
                      {meta(x)})
              ->output());
    } else if (op == "aten::select.int") {
      int64_t dim = wrap_dim(int_argument(node, 1, "dim", 0), meta(x).dim());
      add(x, extern_node("aten::select_backward",
                         {g, Argument::int_list(meta(x).sizes), Argument::integer(dim),
                          Argument::integer(int_argument(node, 2, "index", 0))},
                         {meta(x)})
                 ->output());
    } else {
      return false;
    }
    return true;
  }

  bool extern_rule(const Node& node, const std::string& op, Value* g) {
    Value* x = tensor_argument(node, 0, "self");
    if (op == "aten::mm" || op == "aten::bmm") {
      Value* a = x;
      Value* c = node.arg(1).as_value();
      // x @ w.t() (linear): w's gradient as g.t() @ x, in w's own layout, rather than
      // the transpose of x.t() @ g.
      const Node* t = c->producer();
      bool linear = op == "aten::mm" && t != nullptr && t->op() == "aten::t" &&
                    c->users().size() == 1 && c->num_output_uses() == 0 &&
                    needs(t->arg(0).as_value());
      if (needs(a)) add(a, matmul(op.c_str(), g, transpose_last(c)));
      if (linear) {
        add(t->arg(0).as_value(), matmul("aten::mm", transpose_last(g), a));
      } else if (needs(c)) {
        add(c, matmul(op.c_str(), transpose_last(a), g));
      }
      return true;
    }
    if (op == "aten::conv1d" || op == "aten::conv2d" || op == "aten::conv3d" ||
        op == "aten::convolution") {
      return convolution(node, op, g);
    }
    if (op == "aten::_scaled_dot_product_flash_attention_for_cpu") {
      return cpu_flash_attention(node, g);
    }
    if (op == "aten::_scaled_dot_product_efficient_attention") {
      return efficient_attention(node, g);
    }
    if (op == "aten::_scaled_dot_product_flash_attention") return cuda_flash_attention(node, g);
    if (op == "aten::_scaled_dot_product_cudnn_attention") return cudnn_attention(node, g);
    if (op == "aten::max_pool2d" || op == "aten::max_pool2d_with_indices") {
      if (node.num_outputs() > 1 && grad(node.output(1)) != nullptr) return false;
      std::vector<Argument> pool{x};
      for (size_t i = 1; i < 6; ++i) {
        static constexpr std::string_view kNames[] = {"",        "kernel_size", "stride",
                                                      "padding", "dilation",    "ceil_mode"};
        const Argument* a = argument(node, i, kNames[i]);
        pool.push_back(a == nullptr ? Argument() : *a);
      }
      if (pool[2].is_none() || (pool[2].is_list() && pool[2].as_list().empty())) pool[2] = pool[1];
      if (pool[3].is_none()) pool[3] = Argument::int_list({0});
      if (pool[4].is_none()) pool[4] = Argument::int_list({1});
      if (pool[5].is_none()) pool[5] = Argument::boolean(false);
      Value* indices = nullptr;
      if (node.num_outputs() > 1) {
        indices = node.output(1);
      } else {
        TensorMeta idx = meta(node.output(0));
        idx.dtype = DType::Int64;
        indices = extern_node("aten::max_pool2d_with_indices", pool, {meta(node.output(0)), idx})
                      ->output(1);
      }
      std::vector<Argument> args{g};
      args.insert(args.end(), pool.begin(), pool.end());
      args.emplace_back(indices);
      add(x, extern_node("aten::max_pool2d_with_indices_backward", std::move(args), {meta(x)})
                 ->output());
      return true;
    }
    if (op == "aten::adaptive_avg_pool2d" || op == "aten::_adaptive_avg_pool2d") {
      add(x, extern_node("aten::_adaptive_avg_pool2d_backward", {g, x}, {meta(x)})->output());
      return true;
    }
    if (op == "aten::avg_pool2d") {
      std::vector<Argument> args{g, x};
      static constexpr std::string_view kNames[] = {
          "",          "kernel_size",       "stride",          "padding",
          "ceil_mode", "count_include_pad", "divisor_override"};
      for (size_t i = 1; i < 7; ++i) {
        const Argument* a = argument(node, i, kNames[i]);
        args.push_back(a == nullptr ? Argument() : *a);
      }
      if (args[3].is_none() || (args[3].is_list() && args[3].as_list().empty())) args[3] = args[2];
      if (args[4].is_none()) args[4] = Argument::int_list({0});
      if (args[5].is_none()) args[5] = Argument::boolean(false);
      if (args[6].is_none()) args[6] = Argument::boolean(true);
      add(x, extern_node("aten::avg_pool2d_backward", std::move(args), {meta(x)})->output());
      return true;
    }
    if (op == "aten::embedding") {
      Value* weight = node.arg(0).as_value();
      if (bool_argument(node, 4, "sparse", false)) throw NoRule{"a sparse embedding"};
      add(weight,
          extern_node("aten::embedding_dense_backward",
                      {g, node.arg(1), Argument::integer(meta(weight).sizes[0]),
                       Argument::integer(int_argument(node, 2, "padding_idx", -1)),
                       Argument::boolean(bool_argument(node, 3, "scale_grad_by_freq", false))},
                      {meta(weight)})
              ->output());
      return true;
    }
    if (op == "aten::nll_loss_forward") {
      if (grad(node.output(1)) != nullptr) return false;
      add(x, extern_node("aten::nll_loss_backward",
                         {g, x, node.arg(1), node.arg(2), node.arg(3), node.arg(4), node.output(1)},
                         {meta(x)})
                 ->output());
      return true;
    }
    if (op == "aten::native_dropout") {
      if (grad(node.output(1)) != nullptr) return false;
      const Argument& p = node.arg(1);
      if (p.kind() != Argument::Kind::Double) throw NoRule{"a non-constant dropout rate"};
      double scale = p.as_double() >= 1.0 ? 0.0 : 1.0 / (1.0 - p.as_double());
      add(x,
          extern_node("aten::native_dropout_backward", {g, node.output(1), real(scale)}, {meta(x)})
              ->output());
      return true;
    }
    if (op == "aten::cat") {
      const Argument& list = node.arg(0);
      int64_t dim = wrap_dim(int_argument(node, 1, "dim", 0), meta(node.output(0)).dim());
      int64_t offset = 0;
      for (const Argument& item : list.as_list()) {
        Value* part = item.as_value();
        const TensorMeta& m = meta(part);
        if (m.dim() == 1 && m.sizes[0] == 0) continue;  // legacy empty operand
        int64_t length = m.sizes[static_cast<size_t>(dim)];
        add(part, b_.primitive("aten::slice.Tensor",
                               {g, Argument::integer(dim), Argument::integer(offset),
                                Argument::integer(offset + length), Argument::integer(1)}));
        offset += length;
      }
      return true;
    }
    return false;
  }

  // split, chunk, unbind: the pieces' gradients (zeros for pieces without one) joined
  // again along the dimension.
  bool pieces(const Node& node, const std::string& op) {
    Value* x = node.arg(0).as_value();
    bool unbind = op == "aten::unbind.int";
    int64_t dim = wrap_dim(int_argument(node, unbind ? 1 : 2, "dim", 0), meta(x).dim());
    std::vector<Argument> parts;
    for (Value* piece : node.outputs()) {
      Value* g = grad(piece);
      parts.emplace_back(g != nullptr ? b_.convert(g, meta(piece).dtype) : zeros_like(piece));
    }
    add(x, extern_node(unbind ? "aten::stack" : "aten::cat",
                       {Argument::list(std::move(parts)), Argument::integer(dim)}, {meta(x)})
               ->output());
    return true;
  }

  bool convolution(const Node& node, const std::string& op, Value* g) {
    Value* input = node.arg(0).as_value();
    Value* weight = node.arg(1).as_value();
    const Argument* bias_arg = argument(node, 2, "bias");
    Value* bias = bias_arg != nullptr && bias_arg->is_value() ? bias_arg->as_value() : nullptr;
    size_t spatial = meta(weight).dim() - 2;
    auto list = [&](size_t index, std::string_view name, int64_t fallback) {
      const Argument* a = argument(node, index, name);
      if (a == nullptr || a->is_none()) return std::vector<int64_t>(spatial, fallback);
      if (a->kind() == Argument::Kind::String) throw NoRule{"convolution padding given by name"};
      std::vector<int64_t> v = int_list(*a);
      if (v.size() == 1 && spatial > 1) v.assign(spatial, v[0]);
      return v;
    };
    bool convolution = op == "aten::convolution";
    std::vector<int64_t> stride = list(3, "stride", 1);
    std::vector<int64_t> padding = list(4, "padding", 0);
    std::vector<int64_t> dilation = list(5, "dilation", 1);
    bool transposed = convolution ? bool_argument(node, 6, "transposed", false) : false;
    std::vector<int64_t> output_padding =
        convolution ? list(7, "output_padding", 0) : std::vector<int64_t>(spatial, 0);
    int64_t groups = int_argument(node, convolution ? 8 : 6, "groups", 1);
    Argument bias_sizes = bias == nullptr ? Argument() : Argument::int_list(meta(bias).sizes);
    std::vector<Argument> mask{Argument::boolean(needs(input)), Argument::boolean(needs(weight)),
                               Argument::boolean(bias != nullptr && needs(bias))};
    TensorMeta bias_meta = bias == nullptr
                               ? TensorMeta::contiguous(meta(weight).dtype, {meta(weight).sizes[0]},
                                                        meta(weight).device)
                               : meta(bias);
    Node* back = extern_node(
        "aten::convolution_backward",
        {g, input, weight, bias_sizes, Argument::int_list(stride), Argument::int_list(padding),
         Argument::int_list(dilation), Argument::boolean(transposed),
         Argument::int_list(output_padding), Argument::integer(groups), Argument::list(mask)},
        {meta(input), meta(weight), bias_meta});
    if (needs(input)) add(input, back->output(0));
    if (needs(weight)) add(weight, back->output(1));
    if (bias != nullptr && needs(bias)) add(bias, back->output(2));
    return true;
  }

  // Scaled dot-product attention as the CPU dispatches it (flash attention, which also
  // returns each row's logsumexp): ATen's own backward from the forward's output and
  // logsumexp, so nothing of the attention matrix is saved or recomputed.
  bool cpu_flash_attention(const Node& node, Value* g) {
    auto [query, key, value] = attention_operands(node);
    if (node_draws_random(node)) {
      throw NoRule{"attention with dropout"};  // the forward's draws are not kept
    }
    const Argument* mask = attention_mask(node, 5, "attn_mask");
    const Argument* scale = argument(node, 6, "scale");
    Node* back = extern_node("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                             {g, query, key, value, node.output(0), node.output(1), real(0.0),
                              Argument::boolean(bool_argument(node, 4, "is_causal", false))},
                             {meta(query), meta(key), meta(value)});
    if (mask != nullptr) back->set_kwarg("attn_mask", *mask);
    if (scale != nullptr && !scale->is_none()) back->set_kwarg("scale", *scale);
    add_attention_gradients(query, key, value, *back);
    return true;
  }

  // CUDA's memory-efficient attention (what float32 attention, and attention with a mask,
  // dispatch to): ATen's backward from the forward's output, logsumexp and random state,
  // so a dropout mask is drawn again exactly as the forward drew it. All three operand
  // gradients are asked for: the ones not needed are dropped unread.
  bool efficient_attention(const Node& node, Value* g) {
    auto [query, key, value] = attention_operands(node);
    if (node.num_outputs() != 4) throw NoRule{"an unknown form of efficient attention"};
    if (!bool_argument(node, 4, "compute_log_sumexp", false)) {
      throw NoRule{"attention whose forward kept no logsumexp"};
    }
    const Argument* bias = attention_mask(node, 3, "attn_bias");
    const Argument* scale = argument(node, 7, "scale");
    std::vector<Argument> mask{Argument::boolean(true), Argument::boolean(true),
                               Argument::boolean(true), Argument::boolean(false)};
    Node* back = extern_node(
        "aten::_scaled_dot_product_efficient_attention_backward",
        {g, query, key, value, bias == nullptr ? Argument() : *bias, node.output(0), node.output(1),
         node.output(2), node.output(3), dropout_probability(node), Argument::list(mask),
         Argument::boolean(bool_argument(node, 6, "is_causal", false))},
        {meta(query), meta(key), meta(value), meta(query)});
    if (scale != nullptr && !scale->is_none()) back->set_kwarg("scale", *scale);
    add_attention_gradients(query, key, value, *back);
    return true;
  }

  // CUDA's flash attention (half-precision attention without a mask): ATen's backward from
  // the forward's output, logsumexp and random state. Its outputs are (output, logsumexp,
  // cum_seq_q, cum_seq_k, max_q, max_k, rng_state, unused[, debug mask]); for dense
  // operands the cumulative lengths are undefined and the longest sequences are the
  // operands' lengths.
  bool cuda_flash_attention(const Node& node, Value* g) {
    auto [query, key, value] = attention_operands(node);
    dense_attention_results(node, {query, key, value});
    const Argument* scale = argument(node, 6, "scale");
    Node* back = extern_node(
        "aten::_scaled_dot_product_flash_attention_backward",
        {g, query, key, value, node.output(0), node.output(1), Argument(), Argument(),
         Argument::integer(meta(query).sizes[2]), Argument::integer(meta(key).sizes[2]),
         dropout_probability(node), Argument::boolean(bool_argument(node, 4, "is_causal", false)),
         node.output(6), node.output(7)},
        {meta(query), meta(key), meta(value)});
    if (scale != nullptr && !scale->is_none()) back->set_kwarg("scale", *scale);
    add_attention_gradients(query, key, value, *back);
    return true;
  }

  // cuDNN's attention (what half-precision attention dispatches to on recent GPUs), with
  // the outputs of flash attention, the random state as philox seed and offset.
  bool cudnn_attention(const Node& node, Value* g) {
    auto [query, key, value] = attention_operands(node);
    if (!bool_argument(node, 4, "compute_log_sumexp", false)) {
      throw NoRule{"attention whose forward kept no logsumexp"};
    }
    dense_attention_results(node, {query, key, value});
    const Argument* bias = attention_mask(node, 3, "attn_bias");
    const Argument* scale = argument(node, 8, "scale");
    Node* back = extern_node(
        "aten::_scaled_dot_product_cudnn_attention_backward",
        {g, query, key, value, node.output(0), node.output(1), node.output(6), node.output(7),
         bias == nullptr ? Argument() : *bias, Argument(), Argument(),
         Argument::integer(meta(query).sizes[2]), Argument::integer(meta(key).sizes[2]),
         dropout_probability(node), Argument::boolean(bool_argument(node, 6, "is_causal", false))},
        {meta(query), meta(key), meta(value)});
    if (scale != nullptr && !scale->is_none()) back->set_kwarg("scale", *scale);
    add_attention_gradients(query, key, value, *back);
    return true;
  }

  // Flash and cuDNN attention on dense operands of rank 4: no cumulative sequence lengths
  // (undefined tensors, values without metadata), integer longest lengths, random state.
  static void dense_attention_results(const Node& node, const std::array<Value*, 3>& operands) {
    if (node.num_outputs() < 8 || node.output(2)->meta() != nullptr ||
        node.output(3)->meta() != nullptr || node.output(4)->kind() != ValueKind::Int ||
        node.output(5)->kind() != ValueKind::Int) {
      throw NoRule{"attention over variable-length (nested) operands"};
    }
    for (const Value* operand : operands) {
      if (meta(operand).dim() != 4) throw NoRule{"attention on operands of other ranks"};
    }
  }

  // The attention's mask or bias argument, or nullptr; a mask that needs a gradient has
  // no rule.
  const Argument* attention_mask(const Node& node, size_t index, std::string_view name) const {
    const Argument* mask = argument(node, index, name);
    if (mask == nullptr || mask->is_none()) return nullptr;
    if (mask->is_value() && needs(mask->as_value())) {
      throw NoRule{"a gradient for attention's mask"};
    }
    return mask;
  }

  // The forward's dropout probability, for a backward that draws the same mask again from
  // the forward's random state.
  static Argument dropout_probability(const Node& node) {
    const Argument* dropout = attention_dropout(node);
    if (dropout == nullptr || dropout->is_none()) return real(0.0);
    if (dropout->kind() == Argument::Kind::Int) return real(static_cast<double>(dropout->as_int()));
    if (dropout->kind() != Argument::Kind::Double) {
      throw NoRule{"attention whose dropout probability is known only at run time"};
    }
    return *dropout;
  }

  // An attention node's query, key and value; its other outputs (logsumexp, random state)
  // must need no gradient.
  std::array<Value*, 3> attention_operands(const Node& node) {
    std::array<Value*, 3> operands{tensor_argument(node, 0, "query"),
                                   tensor_argument(node, 1, "key"),
                                   tensor_argument(node, 2, "value")};
    for (Value* v : operands) {
      if (v == nullptr) throw NoRule{"attention on non-tensor operands"};
    }
    for (size_t i = 1; i < node.num_outputs(); ++i) {
      if (grad(node.output(i)) != nullptr) throw NoRule{"a gradient for attention's statistics"};
    }
    return operands;
  }

  // Outputs 0, 1 and 2 of an attention backward, to the operands that need them.
  void add_attention_gradients(Value* query, Value* key, Value* value, const Node& back) {
    if (needs(query)) add(query, back.output(0));
    if (needs(key)) add(key, back.output(1));
    if (needs(value)) add(value, back.output(2));
  }

  Graph& graph_;
  NodeBuilder b_;
  std::vector<bool> needs_;    // by value id
  std::vector<Value*> grads_;  // by value id: the accumulated gradient
  std::vector<bool> shift_;    // by node id: a softmax shift (no gradient)
};

// aten::dropout in training becomes native_dropout, whose mask the backward reads. Both
// draw the same numbers: ATen's dropout is native_dropout on CUDA, and on the CPU a
// Bernoulli draw of the same shape and probability.
void expose_dropout_masks(Graph& graph) {
  std::vector<Node*> found;
  for (Node* node : graph.nodes()) {
    if (node->op() == "aten::dropout") found.push_back(node);
  }
  for (Node* node : found) {
    const Argument* train = argument(*node, 2, "train");
    if (train == nullptr || train->kind() != Argument::Kind::Bool || !train->as_bool()) continue;
    TensorMeta mask = meta(node->output(0));
    mask.dtype = DType::Bool;
    mask.requires_grad = false;
    Node* native = graph.insert_before(node, "aten::native_dropout",
                                       {node->arg(0), node->arg(1), Argument::boolean(true)},
                                       {node->output(0)->type(), ValueType::tensor(mask)});
    graph.replace_all_uses_with(node->output(0), native->output(0));
    graph.remove(node);
  }
}

constexpr std::string_view kRuleOps[] = {"aten::neg",
                                         "aten::exp",
                                         "aten::log",
                                         "aten::tanh",
                                         "aten::erf",
                                         "aten::sigmoid",
                                         "aten::sqrt",
                                         "aten::rsqrt",
                                         "aten::abs",
                                         "aten::relu",
                                         "aten::reciprocal",
                                         "aten::sin",
                                         "aten::cos",
                                         "aten::log1p",
                                         "aten::expm1",
                                         "aten::add.Tensor",
                                         "aten::add.Scalar",
                                         "aten::sub.Tensor",
                                         "aten::sub.Scalar",
                                         "aten::mul.Tensor",
                                         "aten::mul.Scalar",
                                         "aten::div.Tensor",
                                         "aten::div.Scalar",
                                         "aten::pow.Tensor_Scalar",
                                         "aten::pow.Scalar",
                                         "aten::maximum",
                                         "aten::minimum",
                                         "aten::where.self",
                                         "aten::clamp",
                                         "aten::_to_copy",
                                         "aten::sum.dim_IntList",
                                         "aten::amax",
                                         "aten::amin",
                                         "aten::view",
                                         "aten::reshape",
                                         "aten::expand",
                                         "aten::unsqueeze",
                                         "aten::squeeze.dim",
                                         "aten::squeeze",
                                         "aten::squeeze.dims",
                                         "aten::_unsafe_view",
                                         "aten::_reshape_alias",
                                         "aten::flatten.using_ints",
                                         "aten::unflatten.int",
                                         "aten::view_as",
                                         "aten::clone",
                                         "aten::contiguous",
                                         "aten::alias",
                                         "aten::lift_fresh",
                                         "aten::permute",
                                         "aten::t",
                                         "aten::transpose.int",
                                         "aten::slice.Tensor",
                                         "aten::select.int",
                                         "aten::mm",
                                         "aten::bmm",
                                         "aten::conv1d",
                                         "aten::conv2d",
                                         "aten::conv3d",
                                         "aten::convolution",
                                         "aten::_scaled_dot_product_flash_attention_for_cpu",
                                         "aten::_scaled_dot_product_efficient_attention",
                                         "aten::_scaled_dot_product_flash_attention",
                                         "aten::_scaled_dot_product_cudnn_attention",
                                         "aten::max_pool2d",
                                         "aten::max_pool2d_with_indices",
                                         "aten::adaptive_avg_pool2d",
                                         "aten::_adaptive_avg_pool2d",
                                         "aten::avg_pool2d",
                                         "aten::embedding",
                                         "aten::nll_loss_forward",
                                         "aten::native_dropout",
                                         "aten::dropout",
                                         "aten::cat",
                                         "aten::split.Tensor",
                                         "aten::split_with_sizes",
                                         "aten::chunk",
                                         "aten::unbind.int"};

}  // namespace

std::vector<std::string> differentiable_ops() {
  return std::vector<std::string>(std::begin(kRuleOps), std::end(kRuleOps));
}

Expected<JointGraph> derive_joint_graph(const Graph& forward) {
  JointGraph joint;
  joint.graph = forward.clone();
  Graph& graph = joint.graph;
  joint.num_forward_inputs = graph.inputs().size();
  joint.num_forward_outputs = graph.outputs().size();
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* in = graph.inputs()[i];
    if (in->kind() == ValueKind::Tensor && meta(in).requires_grad && is_floating(meta(in).dtype)) {
      joint.grad_inputs.push_back(i);
    }
  }
  if (joint.grad_inputs.empty()) return make_error("no input requires grad");
  expose_dropout_masks(graph);
  std::vector<Node*> order;
  for (Node* node : graph.nodes()) {
    if (node_may_write(*node)) {
      bool written_needs_grad = false;
      for (const Value* v : node->input_values()) {
        written_needs_grad = written_needs_grad || (v->is_input() && meta(v).requires_grad);
      }
      if (written_needs_grad) return make_error(node->op() + " writes an input that requires grad");
    }
    order.push_back(node);
  }
  try {
    Differentiator diff(graph);
    diff.mark_needed(joint.grad_inputs);
    diff.find_softmax_shifts();
    std::vector<Value*> outputs = graph.outputs();
    for (size_t k = 0; k < outputs.size(); ++k) {
      const Value* out = outputs[k];
      if (out->kind() != ValueKind::Tensor || !diff.needs(out)) continue;
      TensorMeta tangent = meta(out);
      tangent.strides = row_major_strides(tangent.sizes);
      tangent.requires_grad = false;
      Value* t = graph.add_input("grad_" + std::to_string(k), ValueType::tensor(tangent));
      diff.seed(out, t);
      joint.differentiable_outputs.push_back(k);
    }
    if (joint.differentiable_outputs.empty()) return make_error("no output needs a gradient");
    joint.first_backward_node = graph.num_node_ids();
    for (auto it = order.rbegin(); it != order.rend(); ++it) diff.differentiate(**it);
    std::vector<size_t> given;
    for (size_t i : joint.grad_inputs) {
      Value* g = diff.grad(graph.inputs()[i]);
      if (g == nullptr) continue;
      outputs.push_back(g);
      given.push_back(i);
    }
    joint.grad_inputs = std::move(given);
    graph.set_outputs(std::move(outputs));
  } catch (const NoRule& no) {
    return make_error(no.why);
  } catch (const InternalError& bug) {
    return make_error(std::string("differentiation failed: ") + bug.what());
  }
  return joint;
}

}  // namespace dynvm::graph
