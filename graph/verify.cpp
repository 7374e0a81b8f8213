// The graph verifier: SSA, metadata and bookkeeping checks, reported as Errors.
#include "dynvm/graph/verify.h"

#include <string>

#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/graph/value_names.h"

namespace dynvm::graph {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& graph)
      : graph_(graph), names_(graph), defined_(graph.num_values(), false) {}

  std::vector<Error> run() {
    check_inputs();
    check_node_list();
    size_t position = 0;
    for (const Node* node : graph_.nodes()) check_node(*node, position++);
    check_outputs();
    check_use_lists();
    return std::move(problems_);
  }

 private:
  void report(std::string message) { problems_.push_back(make_error(std::move(message))); }

  // "node #4 (%3 = aten::mm)": position among the live nodes, as the text lists them.
  std::string describe(const Node& node, size_t position) const {
    std::string text = "node #" + std::to_string(position) + " (";
    for (size_t i = 0; i < node.num_outputs(); ++i) {
      text += (i > 0 ? ", " : "") + names_(node.output(i));
    }
    if (node.num_outputs() > 0) text += " = ";
    return text + node.op() + ")";
  }

  void check_type(const Value& value, const std::string& where) {
    if (value.kind() != ValueKind::Tensor) {
      if (value.type().meta)
        report(where + ": " + names_(&value) + " is not a tensor but has tensor metadata");
      return;
    }
    const TensorMeta* meta = value.meta();
    if (meta == nullptr) {
      // A tensor known only at run time (an undefined result, a kernel's random state)
      // may flow between operators ATen runs, which read it as it comes.
      bool only_extern =
          value.producer() == nullptr || primitive_kind(*value.producer()) == PrimitiveKind::Extern;
      for (const Node* user : value.users()) {
        only_extern = only_extern && primitive_kind(*user) == PrimitiveKind::Extern;
      }
      if (only_extern) return;
      report(where + ": tensor " + names_(&value) + " has no metadata (dtype, device, sizes)");
      return;
    }
    if (meta->strides.size() != meta->sizes.size()) {
      report(where + ": " + names_(&value) + " has " + std::to_string(meta->sizes.size()) +
             " sizes but " + std::to_string(meta->strides.size()) + " strides");
    }
    for (int64_t size : meta->sizes) {
      if (size < 0) {
        report(where + ": " + names_(&value) + " has a negative size");
        break;
      }
    }
    if (meta->is_symbolic()) check_symbolic(*meta, names_(&value), where);
  }

  // Symbolic sizes and strides: one each per dimension, reading declared symbols only, and
  // equal to the concrete sizes and strides at the symbols' hints.
  void check_symbolic(const TensorMeta& meta, const std::string& name, const std::string& where) {
    if (meta.sym_sizes.size() != meta.sizes.size() ||
        meta.sym_strides.size() != meta.strides.size()) {
      report(where + ": " + name + " has symbolic sizes or strides not one per dimension");
      return;
    }
    std::vector<int64_t> hints = graph_.symbol_hints();
    auto check = [&](const std::vector<SymExpr>& exprs, const std::vector<int64_t>& values,
                     const char* what) {
      for (size_t d = 0; d < exprs.size(); ++d) {
        if (!check_symbols_declared(exprs[d], where)) return;
        std::optional<int64_t> v = exprs[d].evaluate(hints);
        if (!v || *v != values[d]) {
          report(where + ": " + name + "'s " + what + " " + exprs[d].to_string() + " is not " +
                 std::to_string(values[d]) + " at the symbols' values");
          return;
        }
      }
    };
    check(meta.sym_sizes, meta.sizes, "size");
    check(meta.sym_strides, meta.strides, "stride");
  }

  bool check_symbols_declared(const SymExpr& expr, const std::string& where) {
    for (int32_t id : expr.symbols()) {
      if (static_cast<size_t>(id) >= graph_.symbols().size()) {
        report(where + ": s" + std::to_string(id) + " is not a symbol of the graph");
        return false;
      }
    }
    return true;
  }

  void check_inputs() {
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Value* input = graph_.inputs()[i];
      std::string where = "graph input " + std::to_string(i);
      if (!graph_.owns(input) || !input->is_input()) {
        report(where + " is not an input value of this graph");
        continue;
      }
      if (!is_valid_input_name(input->name())) {
        report(where + " has an invalid name '" + input->name() + "'");
      }
      for (size_t j = 0; j < i; ++j) {
        if (graph_.inputs()[j]->name() == input->name()) {
          report(where + ": the name %" + input->name() + " is used by input " + std::to_string(j));
        }
      }
      if (defined_[input->id()]) report(where + ": " + names_(input) + " is listed twice");
      defined_[input->id()] = true;
      check_type(*input, where);
    }
  }

  void check_node_list() {
    size_t count = 0;
    const Node* prev = nullptr;
    for (const Node* node : graph_.nodes()) {
      if (!graph_.owns(node) || node->is_removed() || node->prev() != prev) {
        report("the node list is corrupt at position " + std::to_string(count));
        return;
      }
      prev = node;
      ++count;
    }
    if (prev != graph_.last_node() || count != graph_.num_nodes()) {
      report("the node list is corrupt: " + std::to_string(count) + " nodes linked, " +
             std::to_string(graph_.num_nodes()) + " counted");
    }
  }

  void check_node(const Node& node, size_t position) {
    std::string where = describe(node, position);
    if (!parse_op_name(node.op())) {
      report(where + ": operator name '" + node.op() + "' is not of the form ns::name[.overload]");
    }
    for (size_t i = 0; i < node.kwargs().size(); ++i) {
      const std::string& name = node.kwargs()[i].name;
      if (!is_valid_input_name(name)) report(where + ": invalid keyword name '" + name + "'");
      for (size_t j = 0; j < i; ++j) {
        if (node.kwargs()[j].name == name) report(where + ": keyword '" + name + "' given twice");
      }
    }
    node.for_each_input([&](const Value* v) { check_use(where, v); });
    for (size_t i = 0; i < node.num_outputs(); ++i) {
      const Value* out = node.outputs()[i];
      if (!graph_.owns(out) || out->producer() != &node || out->output_index() != i) {
        report(where + ": output " + std::to_string(i) + " does not belong to the node");
        continue;
      }
      if (defined_[out->id()]) report(where + ": " + names_(out) + " is defined twice");
      defined_[out->id()] = true;
      check_type(*out, where);
    }
  }

  void check_use(const std::string& where, const Value* v) {
    if (v == nullptr) {
      report(where + ": reads a null value");
    } else if (!graph_.owns(v)) {
      report(where + ": reads a value of another graph");
    } else if (v->is_removed()) {
      report(where + ": reads " + names_(v) + ", an output of the removed node " +
             v->producer()->op());
    } else if (!defined_[v->id()]) {
      report(where + ": reads " + names_(v) + " before its definition");
    }
  }

  void check_outputs() {
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const Value* v = graph_.outputs()[i];
      std::string where = "graph output " + std::to_string(i);
      if (!graph_.owns(v)) {
        report(where + " is a value of another graph");
      } else if (v->is_removed()) {
        report(where + " is " + names_(v) + ", an output of the removed node " +
               v->producer()->op());
      } else if (!defined_[v->id()]) {
        report(where + " is " + names_(v) + ", which no node defines");
      }
    }
  }

  // Passes rely on Value::users(); a stale list is a bug in whatever edited the graph.
  void check_use_lists() {
    std::vector<size_t> expected(graph_.num_values(), 0);
    std::vector<size_t> expected_output_uses(graph_.num_values(), 0);
    for (const Node* node : graph_.nodes()) {
      node->for_each_input([&](const Value* v) {
        if (graph_.owns(v)) ++expected[v->id()];
      });
    }
    for (const Value* v : graph_.outputs()) {
      if (graph_.owns(v)) ++expected_output_uses[v->id()];
    }
    for (size_t id = 0; id < graph_.num_values(); ++id) {
      const Value* v = graph_.value(id);
      bool stale =
          v->users().size() != expected[id] || v->num_output_uses() != expected_output_uses[id];
      for (const Node* user : v->users()) stale = stale || user->is_removed();
      if (stale) report("the use list of " + names_(v) + " is out of date");
    }
  }

  const Graph& graph_;
  ValueNames names_;
  std::vector<bool> defined_;  // by value id
  std::vector<Error> problems_;
};

}  // namespace

std::vector<Error> verify(const Graph& graph) { return Verifier(graph).run(); }

}  // namespace dynvm::graph
