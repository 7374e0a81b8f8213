// The channels_last pass: new layouts decided in program order, then the conversions in
// and out inserted.
#include "dynvm/graph/channels_last.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "dynvm/graph/check.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/primitive_ops.h"

namespace dynvm::graph {

namespace {

bool is_one_of(std::string_view op, std::initializer_list<std::string_view> ops) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

const TensorMeta* tensor_meta(const Argument& a) {
  return a.is_value() ? a.as_value()->meta() : nullptr;
}

// A 2-d convolution the pass runs channels-last.
bool is_candidate(const Node& node, ChannelsLastMode mode) {
  if (!is_one_of(node.op(), {"aten::convolution", "aten::conv2d"}) || node.args().size() < 2 ||
      node.num_outputs() != 1) {
    return false;
  }
  const TensorMeta* input = tensor_meta(node.arg(0));
  const TensorMeta* weight = tensor_meta(node.arg(1));
  const TensorMeta* out = node.output()->meta();
  if (input == nullptr || weight == nullptr || out == nullptr || input->dim() != 4 ||
      weight->dim() != 4 || out->dim() != 4) {
    return false;
  }
  if (input->dtype != DType::Float32 && input->dtype != DType::Float16 &&
      input->dtype != DType::BFloat16) {
    return false;
  }
  return mode == ChannelsLastMode::On || input->device.type == DeviceType::Cuda;
}

// Pooling that keeps a channels-last input's layout.
bool keeps_layout(const Node& node) {
  return is_one_of(node.op(), {"aten::max_pool2d_with_indices", "aten::max_pool2d",
                               "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
                               "aten::_adaptive_avg_pool2d", "aten::adaptive_max_pool2d"});
}

// Equal sizes, and equal strides on every dimension longer than 1.
bool same_layout(const TensorMeta& a, const TensorMeta& b) {
  if (a.sizes != b.sizes) return false;
  for (size_t d = 0; d < a.dim(); ++d) {
    if (a.sizes[d] > 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

class LayoutPlan {
 public:
  LayoutPlan(Graph& graph, ChannelsLastMode mode) : graph_(graph), mode_(mode) {}

  bool run() {
    bool any = false;
    for (const Node* node : graph_.nodes()) any = any || is_candidate(*node, mode_);
    if (!any) return false;
    for (Node* node : graph_.nodes()) visit(node);
    for (Value* out : graph_.outputs()) {
      if (changed(out)) need_original(out, nullptr);
    }
    // Every value handed back must be convertible to its recorded layout by a clone.
    for (const auto& [value, restore] : restores_) {
      if (!same_layout(original_.at(value).second,
                       TensorMeta::contiguous(value->meta()->dtype, value->meta()->sizes))) {
        undo();
        return false;
      }
    }
    insert_conversions();
    return true;
  }

 private:
  void visit(Node* node) {
    if (is_candidate(*node, mode_)) {
      Value* x = node->arg(0).as_value();
      if (!is_channels_last(*x->meta())) to_channels_last_.emplace_back(node, x);
      // A weight the graph is given (a parameter) is converted once and kept while it
      // is unchanged; one it computes is converted by the convolution itself.
      Value* w = node->arg(1).as_value();
      if (w->is_input() && !is_channels_last(*w->meta())) weights_.emplace_back(node, w);
      set_strides(node->output(), channels_last_strides(node->output()->meta()->sizes));
      return;
    }
    bool reads_changed = false;
    node->for_each_input([&](const Value* v) { reads_changed = reads_changed || changed(v); });
    if (!reads_changed) return;
    if (keeps_layout(*node) && node->arg(0).is_value() &&
        is_channels_last(*node->arg(0).as_value()->meta())) {
      for (Value* out : node->outputs()) {
        if (out->meta() != nullptr && out->meta()->dim() == 4) {
          set_strides(out, channels_last_strides(out->meta()->sizes));
        }
      }
      return;
    }
    switch (primitive_kind(*node)) {
      case PrimitiveKind::View: {
        auto inferred = infer_primitive_meta(node->op(), node->args(), node->kwargs());
        if (inferred && inferred.value().sizes == node->output()->meta()->sizes) {
          set_strides(node->output(), inferred.value().strides);
          return;
        }
        break;  // no view of the new layout: the view reads the recorded one
      }
      case PrimitiveKind::Pointwise: {
        const TensorMeta& out = *node->output()->meta();
        bool follow = false;
        node->for_each_input([&](const Value* v) {
          follow = follow ||
                   (changed(v) && v->meta()->sizes == out.sizes && is_channels_last(*v->meta()));
        });
        if (follow && out.dim() == 4) set_strides(node->output(), channels_last_strides(out.sizes));
        return;
      }
      case PrimitiveKind::Reduction:
      case PrimitiveKind::Window:
        return;  // reads its input through its strides; its result keeps the recorded layout
      case PrimitiveKind::Extern:
        break;
    }
    node->for_each_input([&](Value* v) {
      if (changed(v)) need_original(v, node);
    });
  }

  bool changed(const Value* v) const {
    auto it = original_.find(v);
    return it != original_.end() && !same_layout(it->second.second, *v->meta());
  }

  void set_strides(Value* v, std::vector<int64_t> strides) {
    TensorMeta meta = *v->meta();
    original_.emplace(v, std::make_pair(v, meta));
    meta.strides = std::move(strides);
    v->set_type(ValueType::tensor(std::move(meta)));
  }

  void need_original(Value* v, Node* user) {
    Restore& restore = restores_[v];
    restore.value = v;
    std::vector<Node*>& users = restore.users;
    if (std::find(users.begin(), users.end(), user) == users.end()) users.push_back(user);
  }

  void undo() {
    for (auto& [key, changed] : original_)
      changed.first->set_type(ValueType::tensor(changed.second));
  }

  Value* clone_before(Node* position, Value* v, MemoryFormat format, TensorMeta meta,
                      std::string_view op = "aten::clone") {
    std::vector<KeywordArgument> kwargs = {{"memory_format", Argument::memory_format(format)}};
    Node* clone = position != nullptr
                      ? graph_.insert_before(position, std::string(op), {Argument(v)},
                                             {ValueType::tensor(std::move(meta))}, kwargs)
                      : graph_.append(std::string(op), {Argument(v)},
                                      {ValueType::tensor(std::move(meta))}, kwargs);
    return clone->output();
  }

  // Converts the convolutions' `values` to channels-last, one conversion per value.
  void convert(const std::vector<std::pair<Node*, Value*>>& values, std::string_view op) {
    std::map<Value*, Value*> converted;
    for (const auto& [conv, x] : values) {
      Value*& cl = converted[x];
      if (cl == nullptr) {
        TensorMeta meta = *x->meta();
        meta.strides = channels_last_strides(meta.sizes);
        cl = clone_before(conv, x, MemoryFormat::ChannelsLast, std::move(meta), op);
      }
      graph_.replace_uses_in(conv, x, cl);
    }
  }

  void insert_conversions() {
    convert(to_channels_last_, "aten::clone");
    convert(weights_, kKeptCloneOp);
    for (auto& [key, restore] : restores_) {
      // Before the first reader in program order (readers were found in that order; the
      // graph's outputs, nullptr, come last).
      Value* v = restore.value;
      const std::vector<Node*>& users = restore.users;
      Value* back =
          clone_before(users.front(), v, MemoryFormat::Contiguous, original_.at(key).second);
      for (Node* user : users) {
        if (user != nullptr) graph_.replace_uses_in(user, v, back);
      }
      if (std::find(users.begin(), users.end(), nullptr) != users.end()) {
        std::vector<Value*> outputs = graph_.outputs();
        std::replace(outputs.begin(), outputs.end(), v, back);
        graph_.set_outputs(std::move(outputs));
      }
    }
  }

  Graph& graph_;
  ChannelsLastMode mode_;
  struct ById {
    bool operator()(const Value* a, const Value* b) const { return a->id() < b->id(); }
  };
  // Every value whose layout was set, with its recorded meta.
  std::map<const Value*, std::pair<Value*, TensorMeta>, ById> original_;
  // Convolutions with an input, or a weight the graph is given, to convert.
  std::vector<std::pair<Node*, Value*>> to_channels_last_;
  std::vector<std::pair<Node*, Value*>> weights_;
  // Values some reader needs in their recorded layout, with those readers (nullptr: a
  // graph output) in program order.
  struct Restore {
    Value* value = nullptr;
    std::vector<Node*> users;
  };
  std::map<const Value*, Restore, ById> restores_;
};

}  // namespace

ChannelsLastMode channels_last_mode() {
  const char* text = std::getenv("DYNVM_CHANNELS_LAST");
  std::string_view mode = text == nullptr ? "" : text;
  if (mode.empty() || mode == "auto") return ChannelsLastMode::Auto;
  if (mode == "on" || mode == "1") return ChannelsLastMode::On;
  if (mode == "off" || mode == "0") return ChannelsLastMode::Off;
  static bool warned = false;
  if (!warned) {
    warned = true;
    std::cerr << "dynvm: DYNVM_CHANNELS_LAST=" << mode
              << " is not one of auto, on, off; using auto\n";
  }
  return ChannelsLastMode::Auto;
}

void use_channels_last(Graph& graph) { use_channels_last(graph, channels_last_mode()); }

bool use_channels_last(Graph& graph, ChannelsLastMode mode) {
  if (mode == ChannelsLastMode::Off) return false;
  return LayoutPlan(graph, mode).run();
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes) {
  DYNVM_GRAPH_CHECK(sizes.size() == 4, "channels_last_strides: not 4-d");
  auto at_least_one = [](int64_t s) { return std::max<int64_t>(s, 1); };
  int64_t c = at_least_one(sizes[1]);
  int64_t w = at_least_one(sizes[3]);
  int64_t h = at_least_one(sizes[2]);
  return {h * w * c, 1, w * c, c};
}

bool is_channels_last(const TensorMeta& meta) {
  if (meta.dim() != 4) return false;
  TensorMeta cl = meta;
  cl.strides = channels_last_strides(meta.sizes);
  return same_layout(meta, cl);
}

}  // namespace dynvm::graph
