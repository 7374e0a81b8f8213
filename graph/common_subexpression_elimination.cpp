// Common-subexpression elimination keyed by a canonical text of each pure node.
#include "dynvm/graph/common_subexpression_elimination.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dynvm/graph/alias_analysis.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/op_properties.h"

namespace dynvm::graph {

namespace {

void append_key(std::string& key, const Argument& arg, const ValueNames& names) {
  if (arg.is_value()) {
    // Ids, not printed names: distinct for every value and cheap.
    key += "%v" + std::to_string(arg.as_value()->id());
  } else if (arg.is_list()) {
    key += '[';
    for (const Argument& item : arg.as_list()) {
      append_key(key, item, names);
      key += ',';
    }
    key += ']';
  } else {
    // Literal text is exact (doubles print round-trip), so equal text means equal literal.
    key += to_text(arg, names);
  }
}

// Two nodes with equal keys compute the same thing from the same inputs.
std::string node_key(const Node& node, const ValueNames& names) {
  std::string key = node.op() + "(";
  for (const Argument& a : node.args()) {
    append_key(key, a, names);
    key += ',';
  }
  for (const KeywordArgument& k : node.kwargs()) {
    key += k.name + "=";
    append_key(key, k.value, names);
    key += ',';
  }
  key += ")->";
  for (const Value* out : node.outputs()) key += to_text(out->type()) + ",";
  return key;
}

bool can_replace(const Node& earlier, const Node& later, const AliasAnalysis& aliases) {
  size_t from = aliases.position(&earlier);
  size_t to = aliases.position(&later);
  bool safe = true;
  earlier.for_each_input([&](const Value* v) {
    if (aliases.written_between(aliases.alias_class(v), from, to)) safe = false;
  });
  for (const Node* node : {&earlier, &later}) {
    for (const Value* out : node->outputs()) {
      if (aliases.written_after(aliases.alias_class(out), from)) safe = false;
    }
  }
  return safe;
}

}  // namespace

void common_subexpression_elimination(Graph& graph) {
  AliasAnalysis aliases(graph);
  ValueNames names(graph);
  // Two outputs of the graph are two objects for the caller, which may write one in place
  // after the graph (`xs.append(c * 2); xs.append(c * 2)` then a break and `t.sub_(1)` on
  // each): nodes whose outputs both leave the graph are never merged.
  std::unordered_set<const Value*> escaping(graph.outputs().begin(), graph.outputs().end());
  auto both_escape = [&](const Node& earlier, const Node& later) {
    for (size_t i = 0; i < later.num_outputs(); ++i) {
      if (later.output(i)->meta() != nullptr && escaping.count(earlier.output(i)) &&
          escaping.count(later.output(i))) {
        return true;  // tensors: an int or a bool has no identity to keep
      }
    }
    return false;
  };
  // Looked up by key only, never iterated; candidates are in program order.
  std::unordered_map<std::string, std::vector<Node*>> seen;
  std::vector<Node*> order;
  for (Node* node : graph.nodes()) order.push_back(node);
  for (Node* node : order) {
    if (node->num_outputs() == 0 || !op_properties(node->op()).is_pure() ||
        node_draws_random(*node)) {
      continue;
    }
    std::vector<Node*>& candidates = seen[node_key(*node, names)];
    Node* replacement = nullptr;
    // The latest candidate first: the fewest writes can lie between it and `node`.
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
      if (!both_escape(**it, *node) && can_replace(**it, *node, aliases)) {
        replacement = *it;
        break;
      }
    }
    if (replacement == nullptr) {
      candidates.push_back(node);
      continue;
    }
    for (size_t i = 0; i < node->num_outputs(); ++i) {
      aliases.merge(replacement->output(i), node->output(i));
      graph.replace_all_uses_with(node->output(i), replacement->output(i));
    }
    graph.remove(node);
  }
}

}  // namespace dynvm::graph
