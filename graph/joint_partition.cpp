// partition_joint_graph: the forward and backward halves of a joint graph, choosing which
// forward values the backward reads from memory and which it recomputes.
#include "dynvm/graph/joint_partition.h"

#include <algorithm>
#include <utility>

#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/primitive_ops.h"

namespace dynvm::graph {

namespace {

// The most forward nodes one saved value may be recomputed from.
constexpr size_t kMaxRecomputedCone = 48;

int64_t bytes_of(const Value* v) {
  const TensorMeta* m = v->meta();
  return m == nullptr ? 0 : m->numel() * dtype_itemsize(m->dtype);
}

// Cheap to run twice: a pointwise or view primitive that draws no random number.
bool recomputable(const Node& node) {
  PrimitiveKind kind = primitive_kind(node);
  return (kind == PrimitiveKind::Pointwise || kind == PrimitiveKind::View) &&
         op_properties(node.op()).is_pure();
}

class Partitioner {
 public:
  explicit Partitioner(const JointGraph& joint)
      : joint_(joint),
        graph_(joint.graph),
        saved_(graph_.num_values(), false),
        recompute_(graph_.num_node_ids(), false) {}

  Expected<ForwardBackward> run() {
    collect_backward();
    std::vector<const Value*> reads;  // forward values the live backward nodes read
    for (const Node* node : backward_) {
      node->for_each_input([&](const Value* v) {
        if (!is_forward(v) || saved_[v->id()]) return;
        saved_[v->id()] = true;
        reads.push_back(v);
      });
    }
    for (const Value* v : reads) {
      if (v->kind() != ValueKind::Tensor) {
        return make_error("the backward reads a forward value that is not a tensor");
      }
      if (!v->is_input() && !is_forward_output(v)) without_recompute_ += bytes_of(v);
    }
    choose_recomputation(reads);
    return build();
  }

 private:
  bool is_forward_node(const Node* node) const { return node->id() < joint_.first_backward_node; }
  bool is_forward(const Value* v) const {
    if (v->is_input()) return input_position(v) < joint_.num_forward_inputs;
    return is_forward_node(v->producer());
  }
  bool is_forward_output(const Value* v) const {
    const std::vector<Value*>& outs = graph_.outputs();
    auto end = outs.begin() + static_cast<std::ptrdiff_t>(joint_.num_forward_outputs);
    return std::find(outs.begin(), end, v) != end;
  }
  size_t input_position(const Value* v) const {
    const std::vector<Value*>& inputs = graph_.inputs();
    return static_cast<size_t>(std::find(inputs.begin(), inputs.end(), v) - inputs.begin());
  }

  // The backward nodes the gradients need, in program order.
  void collect_backward() {
    std::vector<bool> live(graph_.num_node_ids(), false);
    std::vector<const Node*> stack;
    const std::vector<Value*>& outputs = graph_.outputs();
    for (size_t i = joint_.num_forward_outputs; i < outputs.size(); ++i) {
      if (!outputs[i]->is_input()) stack.push_back(outputs[i]->producer());
    }
    while (!stack.empty()) {
      const Node* node = stack.back();
      stack.pop_back();
      if (!is_forward_node(node) && !live[node->id()]) {
        live[node->id()] = true;
        node->for_each_input([&](const Value* v) {
          if (!v->is_input()) stack.push_back(v->producer());
        });
      }
    }
    for (const Node* node : graph_.nodes()) {
      if (live[node->id()]) backward_.push_back(node);
    }
  }

  // Walks back from each saved intermediate, latest first, through recomputable forward
  // nodes to values that are inputs, saved already, or not recomputable (the frontier).
  // The value is recomputed when its frontier's new bytes are at most its own.
  void choose_recomputation(std::vector<const Value*> reads) {
    std::sort(reads.begin(), reads.end(), [](const Value* a, const Value* b) {
      size_t pa = a->is_input() ? 0 : a->producer()->id() + 1;
      size_t pb = b->is_input() ? 0 : b->producer()->id() + 1;
      return pa > pb;
    });
    for (const Value* v : reads) {
      // Inputs and outputs are kept anyway.
      if (v->is_input() || is_forward_output(v) || !recomputable(*v->producer())) continue;
      std::vector<const Node*> cone;
      std::vector<const Value*> frontier;
      std::vector<bool> seen_node(graph_.num_node_ids(), false);
      std::vector<bool> seen_value(graph_.num_values(), false);
      std::vector<const Node*> stack{v->producer()};
      bool too_big = false;
      while (!stack.empty() && !too_big) {
        const Node* node = stack.back();
        stack.pop_back();
        if (seen_node[node->id()]) continue;
        seen_node[node->id()] = true;
        cone.push_back(node);
        too_big = cone.size() > kMaxRecomputedCone;
        node->for_each_input([&](const Value* in) {
          if (seen_value[in->id()]) return;
          seen_value[in->id()] = true;
          bool stop = in->is_input() || saved_[in->id()] || recompute_[in->producer()->id()] ||
                      !recomputable(*in->producer()) || in->kind() != ValueKind::Tensor;
          if (stop) {
            frontier.push_back(in);
          } else {
            stack.push_back(in->producer());
          }
        });
      }
      if (too_big) continue;
      int64_t cost = 0;
      bool all_tensors = true;
      for (const Value* f : frontier) {
        all_tensors = all_tensors && f->kind() == ValueKind::Tensor;
        bool free = f->is_input() || saved_[f->id()] || recompute_[f->producer()->id()];
        if (!free) cost += bytes_of(f);
      }
      if (!all_tensors || cost > bytes_of(v)) continue;
      saved_[v->id()] = false;
      for (const Node* node : cone) recompute_[node->id()] = true;
      for (const Value* f : frontier) {
        if (f->is_input() || !recompute_[f->producer()->id()]) saved_[f->id()] = true;
      }
    }
  }

  Expected<ForwardBackward> build() {
    ForwardBackward split;
    split.info.num_forward_outputs = joint_.num_forward_outputs;
    split.info.differentiable_outputs = joint_.differentiable_outputs;
    split.info.grad_inputs = joint_.grad_inputs;
    split.info.saved_bytes_without_recompute = without_recompute_;

    // The forward: every forward node (the passes drop what nothing reads).
    std::vector<Value*> fmap(graph_.num_values(), nullptr);
    auto flookup = [&](const Value* v) { return fmap[v->id()]; };
    for (size_t i = 0; i < joint_.num_forward_inputs; ++i) {
      const Value* in = graph_.inputs()[i];
      fmap[in->id()] = split.forward.add_input(in->name(), in->type());
    }
    for (const Node* node : graph_.nodes()) {
      if (!is_forward_node(node)) continue;
      Node* copy = copy_node(split.forward, *node, flookup);
      for (size_t i = 0; i < node->num_outputs(); ++i)
        fmap[node->output(i)->id()] = copy->output(i);
    }
    std::vector<Value*> forward_outputs;
    for (size_t i = 0; i < joint_.num_forward_outputs; ++i) {
      forward_outputs.push_back(flookup(graph_.outputs()[i]));
    }

    // The backward: saved values and tangents as inputs, recomputed nodes, backward nodes.
    std::vector<Value*> bmap(graph_.num_values(), nullptr);
    auto blookup = [&](const Value* v) { return bmap[v->id()]; };
    for (const Node* node : graph_.nodes()) {
      auto save = [&](const Value* v) {
        if (!saved_[v->id()] || bmap[v->id()] != nullptr) return;
        SavedValue from;
        if (v->is_input()) {
          from = {true, input_position(v)};
        } else {
          const std::vector<Value*>& outs = graph_.outputs();
          auto it =
              std::find(outs.begin(),
                        outs.begin() + static_cast<std::ptrdiff_t>(joint_.num_forward_outputs), v);
          if (it != outs.begin() + static_cast<std::ptrdiff_t>(joint_.num_forward_outputs)) {
            from = {false, static_cast<size_t>(it - outs.begin())};
          } else {
            from = {false, forward_outputs.size()};
            forward_outputs.push_back(flookup(v));
            split.info.saved_bytes += bytes_of(v);
          }
        }
        split.info.saved.push_back(from);
        ValueType type = v->type();
        if (type.meta) type.meta->requires_grad = false;
        bmap[v->id()] = split.backward.add_input(
            "saved_" + std::to_string(split.info.saved.size() - 1), std::move(type));
      };
      bool wanted = recompute_[node->id()] || (!is_forward_node(node) && is_live(node));
      if (!wanted) continue;
      node->for_each_input(save);
    }
    for (size_t i = joint_.num_forward_inputs; i < graph_.inputs().size(); ++i) {
      const Value* t = graph_.inputs()[i];
      bmap[t->id()] = split.backward.add_input(t->name(), t->type());
    }
    for (const Node* node : graph_.nodes()) {
      bool wanted = recompute_[node->id()] || (!is_forward_node(node) && is_live(node));
      if (!wanted) continue;
      Node* copy = copy_node(split.backward, *node, blookup);
      for (size_t i = 0; i < node->num_outputs(); ++i)
        bmap[node->output(i)->id()] = copy->output(i);
      split.info.recomputed_nodes += recompute_[node->id()] ? 1 : 0;
    }
    std::vector<Value*> gradients;
    for (size_t i = joint_.num_forward_outputs; i < graph_.outputs().size(); ++i) {
      gradients.push_back(blookup(graph_.outputs()[i]));
    }
    split.forward.set_outputs(std::move(forward_outputs));
    split.backward.set_outputs(std::move(gradients));
    return split;
  }

  bool is_live(const Node* node) const {
    return std::binary_search(backward_.begin(), backward_.end(), node,
                              [](const Node* a, const Node* b) { return a->id() < b->id(); });
  }

  const JointGraph& joint_;
  const Graph& graph_;
  std::vector<bool> saved_;      // by value id
  std::vector<bool> recompute_;  // by node id: a forward node the backward runs again
  std::vector<const Node*> backward_;
  int64_t without_recompute_ = 0;
};

}  // namespace

Expected<ForwardBackward> partition_joint_graph(const JointGraph& joint) {
  return Partitioner(joint).run();
}

Expected<ForwardBackward> derive_forward_backward(const Graph& forward) {
  auto joint = derive_joint_graph(forward);
  if (!joint) return joint.error();
  return partition_joint_graph(joint.value());
}

std::string to_text(const ForwardBackward& split) {
  std::string text =
      "# forward\n" + to_text(split.forward) + "# backward\n" + to_text(split.backward);
  text += "# saved:";
  for (const SavedValue& s : split.info.saved) {
    text += s.from_input ? " input " : " output ";
    text += std::to_string(s.index);
  }
  text += "\n# saved bytes: " + std::to_string(split.info.saved_bytes) +
          " (without recomputation " + std::to_string(split.info.saved_bytes_without_recompute) +
          "), recomputed nodes: " + std::to_string(split.info.recomputed_nodes) + "\n";
  return text;
}

}  // namespace dynvm::graph
