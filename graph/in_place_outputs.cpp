// mark_in_place_outputs: fused-group outputs stored straight into the inputs they are
// written back into.
#include "dynvm/graph/in_place_outputs.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "dynvm/graph/functionalize.h"
#include "dynvm/graph/memory_planning.h"
#include "dynvm/graph/primitive_ops.h"

namespace dynvm::graph {

namespace {

bool same_layout(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.sizes == b.sizes && a.strides == b.strides && a.device == b.device;
}

// Whether `to` is computed from `from` inside a group graph.
bool depends_on(const Value* to, const Value* from) {
  std::vector<const Value*> stack = {to};
  std::vector<bool> seen(to->id() + 1, false);
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v == from) return true;
    if (v->id() < seen.size()) {
      if (seen[v->id()]) continue;
      seen[v->id()] = true;
    }
    if (const Node* producer = v->producer()) {
      producer->for_each_input([&](const Value* in) { stack.push_back(in); });
    }
  }
  return false;
}

// Whether group `g` may store its output `output` over its input `input`: every value
// computed from the input, directly or not, is computed by pointwise operators of the
// output's sizes (no view remaps an index on the way: each element of the input is read
// only where the output stores it), and the output depends on it.
bool reads_in_step(const Graph& g, size_t input, size_t output) {
  const Value* in = g.inputs()[input];
  const Value* out = g.outputs()[output];
  const TensorMeta* out_meta = out->meta();
  if (out_meta == nullptr) return false;
  std::vector<const Value*> stack = {in};
  std::vector<bool> seen(g.num_values(), false);
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    for (const Node* user : v->users()) {
      if (primitive_kind(*user) != PrimitiveKind::Pointwise) return false;
      for (const Value* result : user->outputs()) {
        const TensorMeta* meta = result->meta();
        if (meta == nullptr || meta->sizes != out_meta->sizes) return false;
        if (result->id() < seen.size() && !seen[result->id()]) {
          seen[result->id()] = true;
          stack.push_back(result);
        }
      }
    }
  }
  return depends_on(out, in);
}

}  // namespace

std::optional<size_t> in_place_target(const Node& node, size_t output) {
  if (node.op() != kFusedOp) return std::nullopt;
  const Argument* into = node.kwarg(kIntoKeyword);
  if (into == nullptr || !into->is_list() || output >= into->as_list().size()) {
    return std::nullopt;
  }
  const Argument& item = into->as_list()[output];
  if (item.kind() != Argument::Kind::Int || item.as_int() < 0 ||
      static_cast<size_t>(item.as_int()) >= node.args().size()) {
    return std::nullopt;
  }
  return static_cast<size_t>(item.as_int());
}

void mark_in_place_outputs(Graph& outer, const FusionPlan& plan, const std::vector<Graph>& groups) {
  std::vector<const Node*> order(outer.nodes().begin(), outer.nodes().end());
  std::vector<size_t> position(outer.num_values(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    for (const Value* out : order[i]->outputs()) position[out->id()] = i;
  }
  for (size_t c = 0; c < order.size(); ++c) {
    const Node& copy = *order[c];
    if (copy.op() != kWriteBackOp || copy.args().size() != 2 || !copy.arg(0).is_value() ||
        !copy.arg(1).is_value()) {
      continue;
    }
    const Value* target = copy.arg(0).as_value();
    const Value* value = copy.arg(1).as_value();
    Node* call = value->producer();
    if (!target->is_input() || call == nullptr || call->op() != kFusedOp) continue;
    if (value->users().size() != 1 || value->num_output_uses() != 0) continue;
    const TensorMeta* target_meta = target->meta();
    const TensorMeta* value_meta = value->meta();
    if (target_meta == nullptr || value_meta == nullptr || !same_layout(*target_meta, *value_meta))
      continue;
    const Argument* group_arg = call->kwarg("group");
    if (group_arg == nullptr || group_arg->kind() != Argument::Kind::Int) continue;
    auto group = static_cast<size_t>(group_arg->as_int());
    if (group >= groups.size() || group >= plan.groups.size() ||
        plan.groups[group].kind != FusionGroupKind::Pointwise) {
      continue;
    }
    // The input and every view of it, in program order.
    std::vector<bool> aliases(outer.num_values(), false);
    aliases[target->id()] = true;
    for (const Node* node : order) {
      OutputStorage storage = default_output_storage(*node);
      if (storage != OutputStorage::AliasesFirst && storage != OutputStorage::AliasesAny) continue;
      bool reads = false;
      node->for_each_input([&](const Value* in) { reads = reads || aliases[in->id()]; });
      if (reads) {
        for (const Value* out : node->outputs()) aliases[out->id()] = true;
      }
    }
    // The call reads the input, if at all, as one argument in step with the output.
    std::optional<size_t> argument;
    bool ok = true;
    for (size_t a = 0; a < call->args().size() && ok; ++a) {
      const Argument& arg = call->arg(a);
      if (!arg.is_value() || !aliases[arg.as_value()->id()]) continue;
      if (arg.as_value() != target || argument) ok = false;
      argument = a;
    }
    // (A group that does not read the input has no argument to name: it keeps its copy.)
    if (!ok || !argument || !reads_in_step(groups[group], *argument, value->output_index())) {
      continue;
    }
    // Nodes between the call and the write-back see the input's old contents.
    size_t from = position[value->id()];
    for (size_t n = from + 1; n < c && ok; ++n) {
      order[n]->for_each_input([&](const Value* in) { ok = ok && !aliases[in->id()]; });
    }
    if (!ok) continue;
    std::vector<int64_t> into(call->num_outputs(), -1);
    if (const Argument* existing = call->kwarg(kIntoKeyword)) {
      for (size_t i = 0; i < into.size() && i < existing->as_list().size(); ++i) {
        into[i] = existing->as_list()[i].as_int();
      }
    }
    into[value->output_index()] = static_cast<int64_t>(*argument);
    call->set_kwarg(kIntoKeyword, Argument::int_list(into));
  }
}

}  // namespace dynvm::graph
