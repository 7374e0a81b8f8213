// Functionalization: rebuilds the graph without in-place writes, tracking for every tensor
// the storage it lives in (its base) and the chain of views leading to it.
#include "dynvm/graph/functionalize.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/graph/check.h"
#include "dynvm/graph/node_builder.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/graph/type_promotion.h"

namespace dynvm::graph {

namespace {

// Thrown inside this file when the graph holds a mutation the pass cannot express; the
// pass then leaves the graph as it was.
struct Unsupported {};

// One step of a view chain: output `index` of the view node `node` (of the old graph).
struct ViewStep {
  const Node* node;
  size_t index;
};

// Where an old tensor value lives: its base storage (an old value id) and the views
// from the base to it.
struct AliasInfo {
  size_t base = 0;
  std::vector<ViewStep> chain;
};

struct CachedValue {
  size_t version = 0;
  Value* value = nullptr;  // nullptr: nothing cached
};

bool literal_true(const Argument* a) {
  return a != nullptr && a->kind() == Argument::Kind::Bool && a->as_bool();
}

// Whether the output of a view or may-alias node shares its input's storage; nullopt
// when that cannot be told from the metadata.
std::optional<bool> aliases_input(const Node& node) {
  OpProperties props = op_properties(node.op());
  if (props.alias == AliasKind::View) return true;
  if (props.alias != AliasKind::MayAlias) return false;
  const Value* in =
      node.args().empty() || !node.arg(0).is_value() ? nullptr : node.arg(0).as_value();
  const TensorMeta* in_meta = in == nullptr ? nullptr : in->meta();
  const TensorMeta* out_meta = node.num_outputs() == 1 ? node.output()->meta() : nullptr;
  if (in_meta == nullptr || out_meta == nullptr) return std::nullopt;
  auto name = parse_op_name(node.op());
  std::string_view base = name ? name->base : std::string_view();
  if (base == "reshape" || base == "reshape_as" || base == "flatten" || base == "ravel") {
    return view_strides(in_meta->sizes, in_meta->strides, out_meta->sizes).has_value();
  }
  bool same_layout = in_meta->dtype == out_meta->dtype && in_meta->device == out_meta->device &&
                     in_meta->sizes == out_meta->sizes && in_meta->strides == out_meta->strides;
  if (base == "contiguous" || base == "type_as" || base == "positive" || base == "resolve_conj" ||
      base == "resolve_neg") {
    return same_layout;
  }
  if (base == "to") {
    const Argument* copy = node.kwarg("copy");
    if (name->overload == "dtype" || name->overload == "other") {
      if (node.args().size() > 3) copy = &node.arg(3);
    } else if (name->overload == "device") {
      if (node.args().size() > 4) copy = &node.arg(4);
    } else if (name->overload != "dtype_layout") {
      return std::nullopt;
    }
    return same_layout && !literal_true(copy);
  }
  return std::nullopt;
}

// Batch norm in training with running statistics, which it updates in place:
// aten::native_batch_norm(x, w, b, running_mean, running_var, True, momentum, eps), or
// aten::_native_batch_norm_legit with the same arguments, or the cuDNN and MIOpen forms a
// CUDA trace records.
bool is_training_batch_norm(const Node& node) {
  // The vendor forms take the same arguments; cuDNN's fourth output (its workspace) has
  // no native equivalent and must be unused.
  bool vendor = node.op() == "aten::cudnn_batch_norm" || node.op() == "aten::miopen_batch_norm";
  if (node.op() != "aten::native_batch_norm" && node.op() != "aten::_native_batch_norm_legit" &&
      !vendor) {
    return false;
  }
  bool outputs =
      node.num_outputs() == 3 || (vendor && node.num_outputs() == 4 && !node.output(3)->has_uses());
  return node.args().size() == 8 && node.arg(5).kind() == Argument::Kind::Bool &&
         node.arg(5).as_bool() && node.arg(3).is_value() && node.arg(4).is_value() && outputs;
}

// X(in-place operator, functional twin) where the twin is not the name without '_':
// random in-place ops, whose twins ATen names differently.
#define DYNVM_FUNCTIONAL_TWINS(X)                        \
  X("aten::bernoulli_.float", "aten::bernoulli.p")       \
  X("aten::bernoulli_.Tensor", "aten::bernoulli.Tensor") \
  X("aten::uniform_", "aten::uniform")                   \
  X("aten::normal_", "aten::normal_functional")

// The out-of-place operator computing what the in-place `op` writes: "aten::add_.Tensor"
// → "aten::add.Tensor"; empty when there is none (other random in-place ops, names that
// do not follow the convention).
std::string functional_twin(const std::string& op) {
#define DYNVM_FUNCTIONAL_TWIN(in_place, twin) \
  if (op == in_place) return twin;
  DYNVM_FUNCTIONAL_TWINS(DYNVM_FUNCTIONAL_TWIN)
#undef DYNVM_FUNCTIONAL_TWIN
  if (op_properties(op).random) return {};
  auto name = parse_op_name(op);
  if (!name || name->base.size() < 2 || name->base.front() == '_' || name->base.back() != '_') {
    return {};
  }
  std::string functional =
      std::string(name->ns) + "::" + std::string(name->base.substr(0, name->base.size() - 1));
  if (!name->overload.empty()) functional += "." + std::string(name->overload);
  return functional;
}

class Functionalizer {
 public:
  explicit Functionalizer(const Graph& old)
      : old_(old),
        info_(old.num_values()),
        cache_(old.num_values()),
        version_(old.num_values(), 0),
        current_(old.num_values(), nullptr),
        env_(old.num_values(), nullptr) {}

  Graph run() {
    for (const Value* input : old_.inputs()) {
      Value* v = out_.add_input(input->name(), input->type());
      env_[input->id()] = v;
      if (input->kind() == ValueKind::Tensor) start_base(input, v);
    }
    for (const Node* node : old_.nodes()) visit(*node);
    // The write-backs run in the grad mode the program wrote its inputs in (an optimizer
    // step writes parameters under no_grad), then the mode the program ended in returns.
    bool switch_mode = input_write_mode_ && *input_write_mode_ != mode_;
    GradMode final_mode = mode_;
    if (switch_mode) {
      // The mode outside the graph cannot be named by a switch.
      if (*input_write_mode_ == GradMode::Ambient) throw Unsupported{};
      set_grad_enabled(*input_write_mode_ == GradMode::On);
    }
    // Write the final value of every mutated input back into it, in input order.
    std::vector<Value*> written(old_.num_values(), nullptr);
    for (const Value* input : old_.inputs()) {
      if (input->kind() != ValueKind::Tensor || version_[input->id()] == 0) continue;
      Value* final_value = current_[input->id()];
      written[input->id()] =
          out_.append(std::string(kWriteBackOp), {env_[input->id()], final_value}, {input->type()})
              ->output();
    }
    if (switch_mode) set_grad_enabled(final_mode == GradMode::On);
    std::vector<Value*> outputs;
    for (const Value* v : old_.outputs()) {
      if (v->kind() != ValueKind::Tensor) {
        outputs.push_back(mapped(v));
        continue;
      }
      const AliasInfo& info = info_[v->id()];
      if (Value* base = written[info.base]) {
        outputs.push_back(replay(base, info.chain, info.chain.size()));
      } else if (!info.chain.empty() && version_[info.base] > 0 && reshapes_storage(info.chain)) {
        // A view of a tensor the graph made and wrote: the view of the base's final value,
        // so that it still aliases the base (returned too, or read after a break), as in
        // eager. Its cached value after a write through it is a new tensor of its own.
        outputs.push_back(replay(current_[info.base], info.chain, info.chain.size()));
      } else {
        outputs.push_back(read(v));
      }
    }
    out_.set_outputs(std::move(outputs));
    return std::move(out_);
  }

 private:
  void start_base(const Value* old_value, Value* new_value) {
    info_[old_value->id()] = AliasInfo{old_value->id(), {}};
    current_[old_value->id()] = new_value;
  }

  Value* mapped(const Value* v) const {
    Value* m = env_[v->id()];
    DYNVM_GRAPH_CHECK(m != nullptr, "functionalize: a value is read before its definition");
    return m;
  }

  // The current contents of an old tensor value.
  Value* read(const Value* v) {
    if (v->kind() != ValueKind::Tensor) return mapped(v);
    const AliasInfo& info = info_[v->id()];
    // A written input read in another grad mode than its write: eager reads the input
    // (a leaf that requires grad, say), the functional graph a value computed in the
    // write's mode, which autograd would treat differently.
    if (version_[info.base] > 0 && input_write_mode_ && *input_write_mode_ != mode_ &&
        old_.value(info.base)->is_input()) {
      throw Unsupported{};
    }
    if (info.chain.empty()) return current_[info.base];
    size_t version = version_[info.base];
    // Start from the longest prefix of the chain whose value is still current.
    size_t done = info.chain.size();
    Value* value = nullptr;
    for (; done > 0; --done) {
      const ViewStep& step = info.chain[done - 1];
      const CachedValue& cached = cache_[step.node->output(step.index)->id()];
      if (cached.value != nullptr && cached.version == version) {
        value = cached.value;
        break;
      }
    }
    if (value == nullptr) value = current_[info.base];
    for (size_t i = done; i < info.chain.size(); ++i) {
      const ViewStep& step = info.chain[i];
      value = emit_view(step, value);
      cache_[step.node->output(step.index)->id()] = CachedValue{version, value};
    }
    cache_[v->id()] = CachedValue{version, value};
    return value;
  }

  // Whether a chain of views selects or rearranges elements at each step: no `detach` or
  // `alias`, which later passes drop as the value itself (a returned detach of a copy
  // replayed on the copy would let them drop the copy too).
  static bool reshapes_storage(const std::vector<ViewStep>& chain) {
    for (const ViewStep& step : chain) {
      std::string_view op = step.node->op();
      if (op == "aten::detach" || op == "aten::alias" || op == "aten::lift_fresh") return false;
    }
    return true;
  }

  // The first `length` views of `chain` applied again to `base` (a new value).
  Value* replay(Value* base, const std::vector<ViewStep>& chain, size_t length) {
    Value* value = base;
    for (size_t i = 0; i < length; ++i) value = emit_view(chain[i], value);
    return value;
  }

  // The view step applied to `input` in the new graph.
  Value* emit_view(const ViewStep& step, Value* input) {
    std::vector<Argument> args = map_arguments(step.node->args(), /*skip_first=*/true);
    args[0] = input;
    std::vector<ValueType> types;
    for (const Value* out : step.node->outputs()) types.push_back(out->type());
    return out_
        .append(step.node->op(), std::move(args), std::move(types),
                map_keywords(step.node->kwargs()))
        ->output(step.index);
  }

  Argument map_argument(const Argument& a) {
    if (a.is_value()) return read(a.as_value());
    if (a.is_list()) {
      std::vector<Argument> items;
      for (const Argument& item : a.as_list()) items.push_back(map_argument(item));
      return Argument::list(std::move(items));
    }
    return a;
  }

  std::vector<Argument> map_arguments(const std::vector<Argument>& args, bool skip_first = false) {
    std::vector<Argument> out;
    for (size_t i = 0; i < args.size(); ++i) {
      out.push_back(skip_first && i == 0 ? Argument() : map_argument(args[i]));
    }
    return out;
  }

  std::vector<KeywordArgument> map_keywords(const std::vector<KeywordArgument>& kwargs) {
    std::vector<KeywordArgument> out;
    for (const KeywordArgument& k : kwargs) out.push_back({k.name, map_argument(k.value)});
    return out;
  }

  void visit(const Node& node) {
    if (node.op() == kSetGradEnabledOp && node.num_outputs() == 0 && node.args().size() == 1 &&
        node.arg(0).kind() == Argument::Kind::Bool) {
      set_grad_enabled(node.arg(0).as_bool());
      return;
    }
    OpProperties props = op_properties(node.op());
    if (props.in_place) {
      visit_in_place(node);
      return;
    }
    if (props.out_variant) {
      visit_out_variant(node);
      return;
    }
    if (is_training_batch_norm(node)) {
      visit_training_batch_norm(node);
      return;
    }
    if (node_may_write(node)) throw Unsupported{};
    std::optional<bool> alias =
        props.alias == AliasKind::None ? std::optional<bool>(false) : aliases_input(node);
    if (!alias) throw Unsupported{};
    std::vector<ValueType> types;
    for (const Value* out : node.outputs()) types.push_back(out->type());
    Node* copy = out_.append(node.op(), map_arguments(node.args()), std::move(types),
                             map_keywords(node.kwargs()));
    const Value* viewed =
        *alias && !node.args().empty() && node.arg(0).is_value() ? node.arg(0).as_value() : nullptr;
    for (size_t i = 0; i < node.num_outputs(); ++i) {
      const Value* out = node.output(i);
      env_[out->id()] = copy->output(i);
      if (out->kind() != ValueKind::Tensor) continue;
      if (viewed != nullptr && viewed->kind() == ValueKind::Tensor) {
        AliasInfo info = info_[viewed->id()];
        info.chain.push_back(ViewStep{&node, i});
        info_[out->id()] = info;
        cache_[out->id()] = CachedValue{version_[info.base], copy->output(i)};
      } else {
        start_base(out, copy->output(i));
      }
    }
  }

  // Batch norm without running statistics (pure), then the statistics' update
  //   running = running * (1 - momentum) + batch * momentum
  // with the batch variance unbiased, as ATen computes it, written like any in-place op.
  void visit_training_batch_norm(const Node& node) {
    const Value* old_mean = node.arg(3).as_value();
    const Value* old_var = node.arg(4).as_value();
    const Argument& momentum_arg = node.arg(6);
    if (momentum_arg.kind() != Argument::Kind::Double &&
        momentum_arg.kind() != Argument::Kind::Int) {
      throw Unsupported{};  // None: a cumulative average
    }
    double momentum = momentum_arg.kind() == Argument::Kind::Double
                          ? momentum_arg.as_double()
                          : static_cast<double>(momentum_arg.as_int());
    Value* x = read(node.arg(0).as_value());
    const TensorMeta* x_meta = x->meta();
    if (x_meta == nullptr || x_meta->dim() < 2 || old_mean->meta() == nullptr ||
        old_var->meta() == nullptr) {
      throw Unsupported{};
    }
    std::vector<ValueType> types;
    for (size_t i = 0; i < 3; ++i) types.push_back(node.output(i)->type());
    Node* norm = out_.append("aten::native_batch_norm",
                             {x, map_argument(node.arg(1)), map_argument(node.arg(2)), Argument(),
                              Argument(), Argument::boolean(true), node.arg(6), node.arg(7)},
                             std::move(types));
    for (size_t i = 0; i < 3; ++i) {
      env_[node.output(i)->id()] = norm->output(i);
      start_base(node.output(i), norm->output(i));
    }
    NodeBuilder b(out_, nullptr);
    size_t rank = x_meta->dim();
    int64_t channels = x_meta->sizes[1];
    std::vector<int64_t> dims = {0};
    for (size_t d = 2; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
    std::vector<int64_t> channel_shape(rank - 1, 1);
    channel_shape[0] = channels;
    int64_t count = channels == 0 ? 0 : x_meta->numel() / channels;
    DType compute = computation_dtype(x_meta->dtype);
    Value* batch_mean = b.convert(norm->output(1), compute);
    Value* centred =
        b.binary("aten::sub.Tensor", b.convert(x, compute), b.reshape(batch_mean, channel_shape));
    Value* batch_var = b.binary("aten::div.Scalar",
                                b.sum(b.binary("aten::mul.Tensor", centred, centred), dims, false),
                                Argument::real(static_cast<double>(count - 1)));
    auto update = [&](const Value* old, Value* batch) {
      Value* running = read(old);
      Value* kept = b.binary("aten::mul.Scalar", running, Argument::real(1.0 - momentum));
      Value* fresh = b.binary("aten::mul.Scalar", batch, Argument::real(momentum));
      write(old, b.convert(b.binary("aten::add.Tensor", kept, fresh), old->meta()->dtype));
    };
    update(old_mean, batch_mean);
    update(old_var, batch_var);
  }

  // The functional form of an in-place node, given the current value of its target.
  Value* functional_value(const Node& node, Value* self, const TensorMeta* self_meta) {
    const std::string& op = node.op();
    ValueType self_type = self->type();
    if (op == "aten::copy_") {
      if (node.args().size() < 2 || !node.arg(1).is_value() || self_meta == nullptr)
        throw Unsupported{};
      Value* src = read(node.arg(1).as_value());
      const TensorMeta* src_meta = src->meta();
      if (src_meta == nullptr) throw Unsupported{};
      if (src_meta->dtype != self_meta->dtype) {
        TensorMeta converted = TensorMeta::contiguous(self_meta->dtype, src_meta->sizes,
                                                      src_meta->device, src_meta->requires_grad);
        src = out_.append("aten::_to_copy", {src}, {ValueType::tensor(converted)},
                          {{"dtype", Argument::dtype(self_meta->dtype)}})
                  ->output();
      }
      bool fresh = src->meta()->dtype != src_meta->dtype;  // made by _to_copy above
      if (src->meta()->sizes != self_meta->sizes) {
        Expected<TensorMeta> expanded =
            infer_primitive_meta("aten::expand", {src, Argument::int_list(self_meta->sizes)});
        if (!expanded) throw Unsupported{};
        src = out_.append("aten::expand", {src, Argument::int_list(self_meta->sizes)},
                          {ValueType::tensor(std::move(expanded).value())})
                  ->output();
        fresh = false;
      }
      if (!fresh) {
        // The target keeps storage of its own: returned, the source itself (or a view of
        // it) would alias another tensor, torch.diff(x, n=0)'s zeros_like(x).copy_(x)
        // being x. decompose drops the copy where nobody could tell.
        TensorMeta copied = TensorMeta::contiguous(self_meta->dtype, self_meta->sizes,
                                                   src_meta->device, src_meta->requires_grad);
        src = out_.append("aten::clone", {src}, {ValueType::tensor(copied)},
                          {{"memory_format", Argument::memory_format(MemoryFormat::Contiguous)}})
                  ->output();
      }
      return src;
    }
    if (op == "aten::zero_" || op == "aten::fill_.Scalar") {
      Argument fill = op == "aten::zero_"
                          ? Argument::integer(0)
                          : (node.args().size() > 1 ? map_argument(node.arg(1)) : Argument());
      if (fill.is_none()) throw Unsupported{};
      return out_.append("aten::full_like", {self, fill}, {self_type})->output();
    }
    std::string functional = functional_twin(op);
    OpProperties props = op_properties(functional);
    // Random twins are fine (they draw as the in-place op would); writing or aliasing ones
    // are no functional form.
    if (functional.empty() || props.mutates || props.effectful || !props.known_namespace ||
        props.may_alias_input()) {
      throw Unsupported{};
    }
    std::vector<Argument> args = map_arguments(node.args(), /*skip_first=*/true);
    args[0] = self;
    std::vector<KeywordArgument> kwargs = map_keywords(node.kwargs());
    // bernoulli_.float's p defaults to 0.5; bernoulli.p's has no default.
    if (op == "aten::bernoulli_.float" && args.size() == 1 && node.kwarg("p") == nullptr) {
      args.push_back(Argument::real(0.5));
    }
    // The out-of-place result may promote (f32.add_(f64) stays f32, f32 + f64 does not).
    ValueType result_type = self_type;
    if (primitive_kind(functional) == PrimitiveKind::Pointwise && self_meta != nullptr) {
      Expected<TensorMeta> meta = infer_primitive_meta(functional, args, kwargs);
      if (meta && meta->dtype != self_meta->dtype) {
        TensorMeta promoted = *self_meta;
        promoted.dtype = meta->dtype;
        result_type = ValueType::tensor(promoted);
      }
    }
    Value* value =
        out_.append(functional, std::move(args), {result_type}, std::move(kwargs))->output();
    if (result_type != self_type) {
      value = out_.append("aten::_to_copy", {value}, {self_type},
                          {{"dtype", Argument::dtype(self_meta->dtype)}})
                  ->output();
    }
    return value;
  }

  // `ns::op.out(args..., out=t)` of an operator whose default overload is a primitive
  // (torch.maximum(a, b, out=m) in Adam's AMSGrad, torch.amax(x, 0, out=m) in Adamax): the
  // primitive, written into `t` like an in-place result. `t` must already have the
  // result's dtype and sizes (ATen would resize or convert it otherwise).
  void visit_out_variant(const Node& node) {
    std::optional<OpName> name = parse_op_name(node.op());
    const Argument* out_arg = node.kwarg("out");
    if (!name || name->overload != "out" || out_arg == nullptr || !out_arg->is_value() ||
        out_arg->as_value()->kind() != ValueKind::Tensor || node.num_outputs() != 1) {
      throw Unsupported{};
    }
    std::string functional = std::string(name->ns) + "::" + std::string(name->base);
    if (primitive_kind(functional) == PrimitiveKind::Extern) throw Unsupported{};
    const Value* target = out_arg->as_value();
    const TensorMeta* target_meta = target->meta();
    check_no_overlapping_operand(node, target);
    std::vector<Argument> args = map_arguments(node.args());
    std::vector<KeywordArgument> kwargs;
    for (const KeywordArgument& k : node.kwargs()) {
      if (k.name != "out") kwargs.push_back({k.name, map_argument(k.value)});
    }
    Expected<TensorMeta> meta = infer_primitive_meta(functional, args, kwargs);
    if (!meta || target_meta == nullptr || meta->dtype != target_meta->dtype ||
        meta->sizes != target_meta->sizes) {
      throw Unsupported{};
    }
    Value* value = out_.append(functional, std::move(args),
                               {ValueType::tensor(std::move(meta).value())}, std::move(kwargs))
                       ->output();
    write(target, value);
    const Value* out = node.output();
    info_[out->id()] = info_[target->id()];
    env_[out->id()] = value;
    cache_[out->id()] = CachedValue{version_[info_[out->id()].base], value};
  }

  void visit_in_place(const Node& node) {
    if (node.op() == "aten::detach_" && node.num_outputs() == 1 && !node.args().empty() &&
        node.arg(0).is_value()) {
      // Changes autograd metadata only: the result is the target, contents unchanged.
      const Value* target = node.arg(0).as_value();
      info_[node.output()->id()] = info_[target->id()];
      env_[node.output()->id()] = read(target);
      return;
    }
    if (node.args().empty() || !node.arg(0).is_value() ||
        node.arg(0).as_value()->kind() != ValueKind::Tensor || node.num_outputs() > 1) {
      throw Unsupported{};
    }
    const Value* target = node.arg(0).as_value();
    check_no_overlapping_operand(node, target);
    Value* self = read(target);
    Value* value = functional_value(node, self, target->meta());
    write(target, value);
    if (node.num_outputs() == 1) {
      const Value* out = node.output();
      info_[out->id()] = info_[target->id()];
      env_[out->id()] = value;
      cache_[out->id()] = CachedValue{version_[info_[out->id()].base], value};
    }
  }

  // Eager writes element by element, so an operand that is another view of the target's
  // storage (x.sub_(x[:1]), x[1:].add_(x[:-1])) is partly read after it was written, or
  // ATen refuses the overlap; the functional form would read all of it first. Such a
  // graph keeps its writes, which ATen then runs as eager does. (Views that do not
  // overlap, a[:, 0].add_(a[:, 1]), are refused too: telling needs storage offsets.)
  void check_no_overlapping_operand(const Node& node, const Value* target) {
    const AliasInfo& written = info_[target->id()];
    node.for_each_input([&](const Value* v) {
      if (v->kind() != ValueKind::Tensor) return;
      const AliasInfo& read = info_[v->id()];
      if (read.base != written.base) return;
      bool same_view = read.chain.size() == written.chain.size() &&
                       std::equal(read.chain.begin(), read.chain.end(), written.chain.begin(),
                                  [](const ViewStep& a, const ViewStep& b) {
                                    return a.node == b.node && a.index == b.index;
                                  });
      if (!same_view) throw Unsupported{};
    });
  }

  // Makes `value` the new contents of the old tensor `target`, scattering it back
  // through the view chain into the base.
  void write(const Value* target, Value* value) {
    AliasInfo info = info_[target->id()];
    if (old_.value(info.base)->is_input()) {
      // All write-backs run in one mode, so the writes into inputs must share one.
      if (input_write_mode_ && *input_write_mode_ != mode_) throw Unsupported{};
      input_write_mode_ = mode_;
    }
    // The current values along the chain, before the write.
    std::vector<Value*> before(info.chain.size() + 1);
    before[0] = current_[info.base];
    for (size_t i = 0; i < info.chain.size(); ++i) {
      before[i + 1] = read(info.chain[i].node->output(info.chain[i].index));
    }
    Value* updated = value;
    for (size_t i = info.chain.size(); i-- > 0;)
      updated = scatter(info.chain[i], before[i], updated);
    current_[info.base] = updated;
    ++version_[info.base];
    cache_[target->id()] = CachedValue{version_[info.base], value};
  }

  // The new value of `parent` once the view `step` of it holds `value`.
  Value* scatter(const ViewStep& step, Value* parent, Value* value) {
    const Node& view = *step.node;
    auto name = parse_op_name(view.op());
    std::string_view base = name ? name->base : std::string_view();
    const ValueType& parent_type = parent->type();
    const TensorMeta* parent_meta = parent->meta();
    if (parent_meta == nullptr || view.num_outputs() != 1) throw Unsupported{};
    if (base == "alias" || base == "detach" || base == "contiguous" || base == "to" ||
        base == "type_as") {
      return value;
    }
    if (base == "view" || base == "reshape" || base == "_unsafe_view" || base == "_reshape_alias" ||
        base == "flatten" || base == "unflatten" || base == "unsqueeze" || base == "squeeze" ||
        base == "view_as" || base == "reshape_as" || base == "ravel") {
      return out_
          .append("aten::reshape", {value, Argument::int_list(parent_meta->sizes)}, {parent_type})
          ->output();
    }
    if (base == "t" || base == "transpose" || base == "permute") {
      std::vector<Argument> args = view.args();
      args[0] = value;
      if (base == "permute") {
        // The inverse permutation.
        if (args.size() < 2 || !args[1].is_list()) throw Unsupported{};
        const auto& dims = args[1].as_list();
        auto rank = static_cast<int64_t>(dims.size());
        std::vector<int64_t> inverse(dims.size(), 0);
        for (size_t i = 0; i < dims.size(); ++i) {
          if (dims[i].kind() != Argument::Kind::Int) throw Unsupported{};
          int64_t d = dims[i].as_int() < 0 ? dims[i].as_int() + rank : dims[i].as_int();
          if (d < 0 || d >= rank) throw Unsupported{};
          inverse[static_cast<size_t>(d)] = static_cast<int64_t>(i);
        }
        args[1] = Argument::int_list(inverse);
      }
      Expected<TensorMeta> meta = infer_primitive_meta(
          base == "transpose" ? "aten::transpose.int" : "aten::" + std::string(base), args);
      if (!meta) throw Unsupported{};
      return out_.append(view.op(), std::move(args), {ValueType::tensor(std::move(meta).value())})
          ->output();
    }
    if (view.op() == "aten::slice.Tensor" || view.op() == "aten::select.int") {
      std::vector<Argument> args = map_arguments(view.args(), /*skip_first=*/true);
      args[0] = parent;
      args.insert(args.begin() + 1, value);
      std::string op =
          view.op() == "aten::slice.Tensor" ? "aten::slice_scatter" : "aten::select_scatter";
      TensorMeta fresh = TensorMeta::contiguous(parent_meta->dtype, parent_meta->sizes,
                                                parent_meta->device, parent_meta->requires_grad);
      return out_
          .append(op, std::move(args), {ValueType::tensor(fresh)}, map_keywords(view.kwargs()))
          ->output();
    }
    throw Unsupported{};
  }

  // Copied in place; later nodes run in its mode.
  void set_grad_enabled(bool enabled) {
    out_.append(std::string(kSetGradEnabledOp), {Argument::boolean(enabled)}, {});
    mode_ = enabled ? GradMode::On : GradMode::Off;
  }

  // Grad mode at a point of the program: as outside the graph until a switch.
  enum class GradMode : uint8_t { Ambient, On, Off };

  const Graph& old_;
  Graph out_;
  GradMode mode_ = GradMode::Ambient;
  std::optional<GradMode> input_write_mode_;  // the mode the graph's inputs were written in
  std::vector<AliasInfo> info_;               // by old value id (tensors)
  std::vector<CachedValue> cache_;            // by old value id: the value of a view, when current
  std::vector<size_t> version_;               // by base id: how often the base was written
  std::vector<Value*> current_;               // by base id: the base's current contents
  std::vector<Value*> env_;                   // by old value id: the new value first defined for it
};

}  // namespace

void functionalize(Graph& graph) {
  bool mutates = false;
  for (const Node* node : graph.nodes()) mutates = mutates || node_may_write(*node);
  if (!mutates) return;
  try {
    Graph functional = Functionalizer(graph).run();
    graph = std::move(functional);
  } catch (const Unsupported&) {
    // Left as it was: later passes treat the mutating nodes as barriers.
  }
}

}  // namespace dynvm::graph
