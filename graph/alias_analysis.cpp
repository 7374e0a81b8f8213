// Alias classes by union-find over value ids, and the positions that write each class.
#include "dynvm/graph/alias_analysis.h"

#include <algorithm>
#include <numeric>

#include "dynvm/graph/check.h"
#include "dynvm/graph/op_properties.h"

namespace dynvm::graph {

namespace {

// The values of the first positional argument that holds any (self, or a Tensor[]).
std::vector<const Value*> first_tensor_argument(const Node& node) {
  std::vector<const Value*> values;
  for (const Argument& a : node.args()) {
    a.for_each_value([&](const Value* v) { values.push_back(v); });
    if (!values.empty()) break;
  }
  return values;
}

std::vector<const Value*> keyword_values(const Node& node) {
  std::vector<const Value*> values;
  for (const KeywordArgument& k : node.kwargs()) {
    k.value.for_each_value([&](const Value* v) { values.push_back(v); });
  }
  return values;
}

std::vector<const Value*> all_inputs(const Node& node) {
  std::vector<const Value*> values;
  node.for_each_input([&](const Value* v) { values.push_back(v); });
  return values;
}

}  // namespace

AliasAnalysis::AliasAnalysis(const Graph& graph)
    : parent_(graph.num_values()), writes_(graph.num_values()), position_(graph.num_node_ids(), 0) {
  std::iota(parent_.begin(), parent_.end(), 0);
  const Value* first_input = nullptr;
  for (const Value* input : graph.inputs()) {
    if (first_input != nullptr) unite(first_input->id(), input->id());
    first_input = input;
  }

  // Pass 1: alias classes. Pass 2 (below) records writes once classes are final.
  std::vector<std::pair<size_t, std::vector<const Value*>>> writes;  // (position, written)
  size_t position = 0;
  for (const Node* node : graph.nodes()) {
    position_[node->id()] = position;
    OpProperties props = op_properties(node->op());
    std::vector<const Value*> joined;   // the outputs share storage with these
    std::vector<const Value*> written;  // storage the node writes
    if (!props.known_namespace) {
      joined = all_inputs(*node);
      written = joined;
    } else if (props.in_place) {
      joined = first_tensor_argument(*node);
      written = joined;
    } else if (props.out_variant) {
      joined = keyword_values(*node);
      if (joined.empty()) joined = all_inputs(*node);
      written = joined;
    } else {
      if (props.may_alias_input()) joined = first_tensor_argument(*node);
      if (props.mutates) written = all_inputs(*node);
    }
    for (const Value* out : node->outputs()) {
      for (const Value* v : joined) {
        if (graph.owns(v)) unite(out->id(), v->id());
      }
    }
    if (!written.empty()) writes.emplace_back(position, std::move(written));
    ++position;
  }
  for (auto& [at, written] : writes) {
    for (const Value* v : written) {
      if (!graph.owns(v)) continue;
      std::vector<size_t>& list = writes_[find(v->id())];
      if (list.empty() || list.back() != at) list.push_back(at);
    }
  }
}

size_t AliasAnalysis::find(size_t id) const {
  DYNVM_GRAPH_CHECK(id < parent_.size(), "alias analysis: value created after the analysis");
  while (parent_[id] != id) {
    parent_[id] = parent_[parent_[id]];
    id = parent_[id];
  }
  return id;
}

void AliasAnalysis::unite(size_t a, size_t b) {
  a = find(a);
  b = find(b);
  if (a == b) return;
  if (b < a) std::swap(a, b);
  parent_[b] = a;
  std::vector<size_t>& into = writes_[a];
  into.insert(into.end(), writes_[b].begin(), writes_[b].end());
  std::sort(into.begin(), into.end());
  into.erase(std::unique(into.begin(), into.end()), into.end());
  writes_[b].clear();
}

size_t AliasAnalysis::alias_class(const Value* value) const { return find(value->id()); }

size_t AliasAnalysis::position(const Node* node) const {
  DYNVM_GRAPH_CHECK(node->id() < position_.size(),
                    "alias analysis: node created after the analysis");
  return position_[node->id()];
}

bool AliasAnalysis::written_between(size_t alias_class, size_t after, size_t before) const {
  const std::vector<size_t>& list = writes_[find(alias_class)];
  auto it = std::upper_bound(list.begin(), list.end(), after);
  return it != list.end() && *it < before;
}

bool AliasAnalysis::written_after(size_t alias_class, size_t position) const {
  const std::vector<size_t>& list = writes_[find(alias_class)];
  return !list.empty() && list.back() > position;
}

void AliasAnalysis::merge(const Value* a, const Value* b) { unite(a->id(), b->id()); }

}  // namespace dynvm::graph
