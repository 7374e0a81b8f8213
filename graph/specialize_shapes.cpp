// Substitution of symbol values into a graph with dynamic shapes.
#include "dynvm/graph/specialize_shapes.h"

#include <string>
#include <utility>

#include "dynvm/graph/node.h"

namespace dynvm::graph {

namespace {

bool evaluate_all(const std::vector<SymExpr>& exprs, const std::vector<int64_t>& values,
                  std::vector<int64_t>& out) {
  out.clear();
  out.reserve(exprs.size());
  for (const SymExpr& e : exprs) {
    std::optional<int64_t> v = e.evaluate(values);
    if (!v) return false;
    out.push_back(*v);
  }
  return true;
}

// `arg` with every symbolic int evaluated; false when one cannot be.
bool specialize_argument(Argument& arg, const std::vector<int64_t>& values) {
  if (arg.kind() == Argument::Kind::SymInt) {
    std::optional<int64_t> v = arg.as_sym_int().evaluate(values);
    if (!v) return false;
    arg = Argument::integer(*v);
    return true;
  }
  if (!arg.is_list()) return true;
  std::vector<Argument> items = arg.as_list();
  bool changed = false;
  for (Argument& item : items) {
    bool symbolic = item.kind() == Argument::Kind::SymInt || item.is_list();
    if (!symbolic) continue;
    if (!specialize_argument(item, values)) return false;
    changed = true;
  }
  if (changed) arg = Argument::list(std::move(items));
  return true;
}

bool has_sym_int(const Argument& arg) {
  if (arg.kind() == Argument::Kind::SymInt) return true;
  if (!arg.is_list()) return false;
  for (const Argument& item : arg.as_list()) {
    if (has_sym_int(item)) return true;
  }
  return false;
}

}  // namespace

std::optional<TensorMeta> specialize_meta(const TensorMeta& meta,
                                          const std::vector<int64_t>& values) {
  if (!meta.is_symbolic()) return meta;
  TensorMeta out = meta;
  if (!evaluate_all(meta.sym_sizes, values, out.sizes) ||
      !evaluate_all(meta.sym_strides, values, out.strides)) {
    return std::nullopt;
  }
  for (int64_t size : out.sizes) {
    if (size < 0) return std::nullopt;
  }
  out.sym_sizes.clear();
  out.sym_strides.clear();
  return out;
}

Expected<Graph> specialize_shapes(const Graph& graph, const std::vector<int64_t>& values) {
  if (values.size() != graph.symbols().size()) {
    return make_error("specialize_shapes: " + std::to_string(values.size()) + " values for " +
                      std::to_string(graph.symbols().size()) + " symbols");
  }
  for (const SymRelation& r : graph.relations()) {
    std::optional<bool> holds = r.holds(values);
    if (!holds || !*holds) {
      return make_error("specialize_shapes: the relation " + r.to_string() + " does not hold");
    }
  }
  Graph out = graph.clone();
  auto fix_value = [&](Value* v) -> bool {
    const TensorMeta* meta = v->meta();
    if (meta == nullptr || !meta->is_symbolic()) return true;
    std::optional<TensorMeta> fixed = specialize_meta(*meta, values);
    if (!fixed) return false;
    v->set_type(ValueType::tensor(std::move(*fixed)));
    return true;
  };
  auto failure = [](const std::string& where) {
    return make_error("specialize_shapes: cannot evaluate the sizes of " + where +
                      " at these symbol values");
  };
  for (Value* input : out.inputs()) {
    if (!fix_value(input)) return failure("%" + input->name());
  }
  for (Node* node : out.nodes()) {
    for (Value* output : node->outputs()) {
      if (!fix_value(output)) return failure("an output of " + node->op());
    }
    for (size_t i = 0; i < node->args().size(); ++i) {
      if (!has_sym_int(node->args()[i])) continue;
      Argument arg = node->args()[i];
      if (!specialize_argument(arg, values)) return failure("an argument of " + node->op());
      node->set_arg(i, std::move(arg));
    }
    for (const KeywordArgument& k : node->kwargs()) {
      if (!has_sym_int(k.value)) continue;
      Argument arg = k.value;
      if (!specialize_argument(arg, values)) return failure("an argument of " + node->op());
      node->set_kwarg(k.name, std::move(arg));
    }
  }
  out.clear_symbols();
  return out;
}

}  // namespace dynvm::graph
