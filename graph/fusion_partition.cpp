// Greedy fusion along data-flow edges over a union-find of groups; a Boost.Graph
// depth-first search over the group quotient refuses merges that would make a cycle.
#include "dynvm/graph/fusion_partition.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>

#include "dynvm/graph/check.h"
#include "dynvm/graph/graph_analysis.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/graph/value_names.h"

namespace dynvm::graph {

namespace {

using UnitGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// What a growing group must agree on to stay one kernel.
struct Signature {
  bool reduction = false;
  int64_t numel = 0;  // pointwise: elements; reduction: rows
  int64_t reduction_numel = 1;
  // Reductions: the sizes of the reduced tensor and the reduced dimensions (sorted), so
  // all reductions of a group walk their elements in the same rows and columns.
  std::vector<int64_t> reduced_sizes;
  std::vector<int64_t> reduced_dims;
  // The iteration space: the reduced tensor's sizes, or a pointwise node's output sizes.
  std::vector<int64_t> sizes;
  Device device;
  bool has_compute = false;  // holds a pointwise or reduction node (not only views)
  // A pointwise group whose iteration space is a window node's output (max_pool2d): the
  // elements of that node's input, which a producer computing them may be merged into
  // the group to compute (again for each window tap) rather than store. 0: none.
  int64_t window_input_numel = 0;
};

// Can groups with signatures `a` and `b` become one? Returns the merged signature.
std::optional<Signature> merge_signatures(const Signature& a, const Signature& b) {
  if (a.device != b.device) return std::nullopt;
  Signature out = a.reduction ? a : b;
  const Signature& other = a.reduction ? b : a;
  out.has_compute = a.has_compute || b.has_compute;
  out.window_input_numel = std::max(a.window_input_numel, b.window_input_numel);
  if (!out.reduction) {
    if (a.numel != b.numel) return std::nullopt;
    return out;
  }
  if (other.reduction) {
    if (other.reduced_sizes != out.reduced_sizes || other.reduced_dims != out.reduced_dims)
      return std::nullopt;
    return out;
  }
  if (other.numel == out.numel || other.numel == out.numel * out.reduction_numel) return out;
  return std::nullopt;
}

// Nodes with side effects (writes left after functionalization, the write-back copies,
// random draws, grad-mode switches, opaque calls) are barriers: nothing moves across
// them. Epoch of a node: 2k for a node after k barriers, 2k + 1 for the k-th barrier
// itself; epochs never decrease along program order, so along data flow either.
std::vector<size_t> node_epochs(const Graph& graph) {
  std::vector<size_t> epoch(graph.num_node_ids(), 0);
  size_t barriers = 0;
  for (const Node* node : graph.nodes()) {
    if (op_properties(node->op()).has_side_effects() || node_draws_random(*node)) {
      epoch[node->id()] = 2 * barriers + 1;
      ++barriers;
    } else {
      epoch[node->id()] = 2 * barriers;
    }
  }
  return epoch;
}

bool has_metadata(const Node& node) {
  bool ok = node.num_outputs() == 1 && node.output()->meta() != nullptr;
  node.for_each_input([&](const Value* v) {
    if (v->kind() == ValueKind::Tensor && v->meta() == nullptr) ok = false;
  });
  return ok;
}

// Whether anything may see `v` alias its base: it is returned (the caller may rely on it),
// or a node writes it (an in-place op functionalization left in place, an opaque call),
// directly or through further views of it.
bool aliasing_observed(const Value* v) {
  if (v->num_output_uses() > 0) return true;
  for (const Node* user : v->users()) {
    const OpProperties& properties = op_properties(user->op());
    if (properties.mutates || !properties.known_namespace) return true;
    if (!properties.may_alias_input()) continue;
    for (const Value* out : user->outputs()) {
      if (aliasing_observed(out)) return true;
    }
  }
  return false;
}

std::optional<Signature> node_signature(const Node& node) {
  PrimitiveKind kind = primitive_kind(node);
  if (kind == PrimitiveKind::Extern || !has_metadata(node)) return std::nullopt;
  // Such a view must stay a view, so ATen runs it: a group would make it a copy, and a
  // write through it (a.expand_as(a).add_(3)) would miss its base.
  if (kind == PrimitiveKind::View && aliasing_observed(node.output())) return std::nullopt;
  const TensorMeta& out = *node.output()->meta();
  Signature s;
  s.device = out.device;
  s.numel = out.numel();
  s.sizes = out.sizes;
  s.has_compute = kind != PrimitiveKind::View;
  if (kind == PrimitiveKind::Window) s.window_input_numel = node.arg(0).as_value()->meta()->numel();
  if (kind == PrimitiveKind::Reduction) {
    const TensorMeta& in = *node.arg(0).as_value()->meta();
    s.reduction = true;
    s.reduction_numel = s.numel == 0 ? 0 : in.numel() / s.numel;
    s.reduced_sizes = in.sizes;
    s.sizes = in.sizes;
    auto rank = static_cast<int64_t>(in.dim());
    Argument dims = node.args().size() > 1 ? node.arg(1) : Argument();
    if (dims.is_list() && !dims.as_list().empty()) {
      for (const Argument& d : dims.as_list()) {
        int64_t dim = d.kind() == Argument::Kind::Int ? d.as_int() : 0;
        s.reduced_dims.push_back(dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim);
      }
    } else if (dims.kind() == Argument::Kind::Int) {
      int64_t dim = dims.as_int();
      s.reduced_dims.push_back(dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim);
    } else {
      for (int64_t d = 0; d < rank; ++d) s.reduced_dims.push_back(d);
    }
    std::sort(s.reduced_dims.begin(), s.reduced_dims.end());
  }
  return s;
}

class Partitioner {
 public:
  explicit Partitioner(const Graph& graph)
      : graph_(graph),
        parent_(graph.num_node_ids()),
        signature_(graph.num_node_ids()),
        candidate_(graph.num_node_ids(), false) {
    for (size_t i = 0; i < parent_.size(); ++i) parent_[i] = i;
  }

  FusionPlan run() {
    // Program order is a topological order of a verified graph, and greedy merging in it
    // is predictable; a cycle is a compiler bug.
    DYNVM_GRAPH_CHECK(topological_order(graph_).ok(),
                      "partition_for_fusion: the data flow has a cycle");
    for (const Node* node : graph_.nodes()) live_.push_back(node);
    epoch_ = node_epochs(graph_);
    members_.resize(graph_.num_node_ids());
    for (const Node* node : live_) {
      std::optional<Signature> s = node_signature(*node);
      if (!s) continue;
      candidate_[node->id()] = true;
      members_[node->id()].push_back(node);
      signature_[node->id()] = *s;
      std::vector<const Node*> producers;
      node->for_each_input([&](const Value* v) {
        const Node* p = v->producer();
        if (p != nullptr && candidate_[p->id()] &&
            std::find(producers.begin(), producers.end(), p) == producers.end()) {
          producers.push_back(p);
        }
      });
      for (const Node* p : producers) try_merge(find(p->id()), find(node->id()));
    }
    inline_broadcast_operands();
    return make_plan();
  }

 private:
  size_t find(size_t id) {
    while (parent_[id] != id) {
      parent_[id] = parent_[parent_[id]];
      id = parent_[id];
    }
    return id;
  }

  void try_merge(size_t a, size_t b) {
    if (a == b) return;
    if (epoch_[a] != epoch_[b]) return;  // a group never spans a barrier
    std::optional<Signature> merged = merge_signatures(signature_[a], signature_[b]);
    if (!merged) merged = merge_into_window(a, b);
    if (!merged || would_cycle(a, b)) return;
    parent_[b] = a;
    members_[a].insert(members_[a].end(), members_[b].begin(), members_[b].end());
    members_[b].clear();
    signature_[a] = *merged;
  }

  // Pointwise group `a` computing the input of the window node of group `b`, and read by
  // nothing else: `b` computes a's values at each window tap instead of reading them from
  // memory (batch norm and relu before a max pool: the pool's input is never stored).
  std::optional<Signature> merge_into_window(size_t a, size_t b) {
    const Signature& producer = signature_[a];
    const Signature& window = signature_[b];
    if (window.window_input_numel == 0 || window.reduction || producer.reduction ||
        !producer.has_compute || producer.window_input_numel != 0 ||
        producer.numel != window.window_input_numel || producer.device != window.device) {
      return std::nullopt;
    }
    for (const Node* member : members_[a]) {
      for (const Value* out : member->outputs()) {
        if (out->num_output_uses() > 0) return std::nullopt;
        for (const Node* user : out->users()) {
          size_t u = unit(user);
          if (u != a && u != b) return std::nullopt;
        }
      }
    }
    return window;
  }

  // A small pointwise group whose results only one larger group reads (batch norm's
  // per-channel scale, a bias computed from parameters) joins that group: its values
  // broadcast into the group's iteration space, and a kernel is saved. No cycle can
  // result, since nothing else reads the small group.
  void inline_broadcast_operands() {
    for (const Node* node : live_) {
      if (!candidate_[node->id()] || find(node->id()) != node->id()) continue;
      size_t small = node->id();
      const Signature& s = signature_[small];
      if (s.reduction || !s.has_compute) continue;
      std::optional<size_t> reader;
      bool single_reader = true;
      for (const Node* member : members_[small]) {
        for (const Value* out : member->outputs()) {
          if (out->num_output_uses() > 0) single_reader = false;
          for (const Node* user : out->users()) {
            if (!candidate_[user->id()]) {
              single_reader = false;
              continue;
            }
            size_t u = find(user->id());
            if (u == small) continue;
            if (reader && *reader != u) single_reader = false;
            reader = u;
          }
        }
      }
      if (!single_reader || !reader) continue;
      const Signature& big = signature_[*reader];
      int64_t full = big.reduction ? big.numel * big.reduction_numel : big.numel;
      if (epoch_[small] != epoch_[*reader] || s.device != big.device || s.numel >= full) continue;
      parent_[small] = *reader;
      members_[*reader].insert(members_[*reader].end(), members_[small].begin(),
                               members_[small].end());
      members_[small].clear();
    }
  }

  // The unit of a live node: its group's root for candidates, itself otherwise.
  size_t unit(const Node* node) { return candidate_[node->id()] ? find(node->id()) : node->id(); }

  // Whether a path from group `a` reaches group `b` through some other unit, which a
  // merge of the two would turn into a cycle. (Paths from b to a cannot exist: a feeds b.)
  bool would_cycle(size_t a, size_t b) {
    // Cheap exit, the common case: everything reading `a` is in `a` or `b`.
    bool other_readers = false;
    for (const Node* member : members_[a]) {
      for (const Value* out : member->outputs()) {
        for (const Node* user : out->users()) {
          size_t u = unit(user);
          other_readers = other_readers || (u != a && u != b);
        }
      }
    }
    if (!other_readers) return false;
    UnitGraph units(graph_.num_node_ids());
    std::vector<size_t> starts;
    for (const Node* node : live_) {
      size_t to = unit(node);
      node->for_each_input([&](const Value* v) {
        const Node* p = v->producer();
        if (p == nullptr || p->is_removed()) return;
        size_t from = unit(p);
        if (from == to) return;
        if (from == a && to != b) starts.push_back(to);
        boost::add_edge(from, to, units);
      });
    }
    std::vector<boost::default_color_type> colors(boost::num_vertices(units), boost::white_color);
    auto color_map =
        boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, units));
    for (size_t start : starts) {
      if (colors[start] == boost::white_color) {
        boost::depth_first_visit(units, start, boost::default_dfs_visitor(), color_map);
      }
      if (colors[b] != boost::white_color) return true;
    }
    return false;
  }

  // A view of a group value that only nodes outside the group read leaves the group:
  // the group outputs the viewed value and ATen makes the view for free, so the group's
  // outputs keep the shapes of its iteration space. Last to first, so chains of views
  // at the boundary all leave.
  static void trim_boundary_views(FusionPlan& plan, FusionGroup& group) {
    int id = static_cast<int>(group.id);
    for (auto it = group.nodes.rbegin(); it != group.nodes.rend(); ++it) {
      const Node* node = *it;
      if (primitive_kind(*node) != PrimitiveKind::View || !node->arg(0).is_value()) continue;
      const Node* producer = node->arg(0).as_value()->producer();
      if (producer == nullptr || plan.group_of(*producer) != id) continue;
      bool read_inside = false;
      for (const Node* user : node->output()->users()) {
        read_inside = read_inside || plan.group_of(*user) == id;
      }
      if (!read_inside) plan.group_of_node[node->id()] = -1;
    }
    std::vector<const Node*> kept;
    for (const Node* node : group.nodes) {
      if (plan.group_of(*node) == id) kept.push_back(node);
    }
    group.nodes = std::move(kept);
  }

  FusionPlan make_plan() {
    FusionPlan plan;
    plan.group_of_node.assign(graph_.num_node_ids(), -1);
    std::vector<int> group_of_root(graph_.num_node_ids(), -1);
    for (const Node* node : live_) {
      if (!candidate_[node->id()]) continue;
      size_t root = find(node->id());
      if (!signature_[root].has_compute) continue;  // views alone stay with ATen
      if (group_of_root[root] < 0) {
        group_of_root[root] = static_cast<int>(plan.groups.size());
        FusionGroup group;
        group.id = plan.groups.size();
        const Signature& s = signature_[root];
        group.kind = s.reduction ? FusionGroupKind::Reduction : FusionGroupKind::Pointwise;
        group.numel = s.numel;
        group.reduction_numel = s.reduction ? s.reduction_numel : 1;
        group.sizes = s.sizes;
        group.reduction_dims = s.reduced_dims;
        plan.groups.push_back(std::move(group));
      }
      plan.group_of_node[node->id()] = group_of_root[root];
      plan.groups[static_cast<size_t>(group_of_root[root])].nodes.push_back(node);
    }
    for (FusionGroup& group : plan.groups) trim_boundary_views(plan, group);
    for (FusionGroup& group : plan.groups) {
      int id = static_cast<int>(group.id);
      for (const Node* node : group.nodes) {
        node->for_each_input([&](const Value* v) {
          bool inside = v->producer() != nullptr && plan.group_of(*v->producer()) == id;
          if (!inside &&
              std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end()) {
            group.inputs.push_back(v);
          }
        });
        for (const Value* out : node->outputs()) {
          bool used_outside = out->num_output_uses() > 0;
          for (const Node* user : out->users())
            used_outside = used_outside || plan.group_of(*user) != id;
          if (used_outside) group.outputs.push_back(out);
        }
      }
    }
    return plan;
  }

  const Graph& graph_;
  std::vector<size_t> parent_;                     // by node id: union-find over groups
  std::vector<Signature> signature_;               // by root node id
  std::vector<bool> candidate_;                    // by node id: a primitive node that may be fused
  std::vector<size_t> epoch_;                      // by node id: see node_epochs
  std::vector<const Node*> live_;                  // program order
  std::vector<std::vector<const Node*>> members_;  // by root node id: the group's nodes
};

}  // namespace

std::string_view fusion_group_kind_name(FusionGroupKind kind) {
  return kind == FusionGroupKind::Pointwise ? "pointwise" : "reduction";
}

FusionPlan partition_for_fusion(const Graph& graph) { return Partitioner(graph).run(); }

Graph extract_group(const Graph& graph, const FusionGroup& group) {
  Graph out;
  std::vector<Value*> map(graph.num_values(), nullptr);
  for (size_t i = 0; i < group.inputs.size(); ++i) {
    map[group.inputs[i]->id()] = out.add_input("in" + std::to_string(i), group.inputs[i]->type());
  }
  auto lookup = [&](const Value* v) {
    Value* m = map[v->id()];
    DYNVM_GRAPH_CHECK(m != nullptr, "extract_group: a value read before its definition");
    return m;
  };
  for (const Node* node : group.nodes) {
    Node* copy = copy_node(out, *node, lookup);
    for (size_t i = 0; i < node->num_outputs(); ++i) map[node->output(i)->id()] = copy->output(i);
  }
  std::vector<Value*> outputs;
  for (const Value* v : group.outputs) outputs.push_back(lookup(v));
  out.set_outputs(std::move(outputs));
  return out;
}

// GCC 13 reports a std::variant move inside this function as a maybe-uninitialized read
// of its std::string alternative (a false positive: only Value* arguments are built here).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
Graph build_outer_graph(const Graph& graph, const FusionPlan& plan) {
  // Units: one per group, then one per node outside groups; Kahn's algorithm picks the
  // ready unit whose first node comes first in program order.
  std::vector<const Node*> live;
  for (const Node* node : graph.nodes()) live.push_back(node);
  size_t num_groups = plan.groups.size();
  std::vector<size_t> unit_of_node(graph.num_node_ids(), 0);
  std::vector<size_t> first_position;
  std::vector<const Node*> single;  // by unit - num_groups
  first_position.assign(num_groups, live.size());
  for (size_t pos = 0; pos < live.size(); ++pos) {
    const Node* node = live[pos];
    int g = plan.group_of(*node);
    if (g >= 0) {
      unit_of_node[node->id()] = static_cast<size_t>(g);
      first_position[static_cast<size_t>(g)] =
          std::min(first_position[static_cast<size_t>(g)], pos);
    } else {
      unit_of_node[node->id()] = num_groups + single.size();
      single.push_back(node);
      first_position.push_back(pos);
    }
  }
  size_t num_units = first_position.size();
  std::vector<std::vector<size_t>> successors(num_units);
  std::vector<size_t> indegree(num_units, 0);
  for (const Node* node : live) {
    size_t to = unit_of_node[node->id()];
    node->for_each_input([&](const Value* v) {
      const Node* p = v->producer();
      if (p == nullptr || p->is_removed()) return;
      size_t from = unit_of_node[p->id()];
      if (from == to) return;
      successors[from].push_back(to);
      ++indegree[to];
    });
  }
  // Ordered by epoch first, so every unit runs between the same barriers as before.
  std::vector<size_t> epoch = node_epochs(graph);
  std::vector<size_t> unit_epoch(num_units, 0);
  for (const Node* node : live) unit_epoch[unit_of_node[node->id()]] = epoch[node->id()];
  using Entry = std::tuple<size_t, size_t, size_t>;  // (epoch, first position, unit)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (size_t u = 0; u < num_units; ++u) {
    if (indegree[u] == 0) ready.push({unit_epoch[u], first_position[u], u});
  }
  Graph out;
  std::vector<Value*> map(graph.num_values(), nullptr);
  for (const Value* input : graph.inputs())
    map[input->id()] = out.add_input(input->name(), input->type());
  auto lookup = [&](const Value* v) {
    Value* m = map[v->id()];
    DYNVM_GRAPH_CHECK(m != nullptr, "build_outer_graph: a value read before its definition");
    return m;
  };
  size_t emitted = 0;
  while (!ready.empty()) {
    size_t u = std::get<2>(ready.top());
    ready.pop();
    ++emitted;
    if (u < num_groups) {
      const FusionGroup& group = plan.groups[u];
      std::vector<Argument> args;
      args.reserve(group.inputs.size());
      for (const Value* v : group.inputs) args.emplace_back(lookup(v));
      std::vector<ValueType> types;
      for (const Value* v : group.outputs) types.push_back(v->type());
      std::vector<KeywordArgument> kwargs(1);
      kwargs[0].name = "group";
      kwargs[0].value = Argument::integer(static_cast<int64_t>(group.id));
      Node* call =
          out.append(std::string(kFusedOp), std::move(args), std::move(types), std::move(kwargs));
      for (size_t i = 0; i < group.outputs.size(); ++i)
        map[group.outputs[i]->id()] = call->output(i);
    } else {
      const Node* node = single[u - num_groups];
      Node* copy = copy_node(out, *node, lookup);
      for (size_t i = 0; i < node->num_outputs(); ++i) map[node->output(i)->id()] = copy->output(i);
    }
    for (size_t s : successors[u]) {
      if (--indegree[s] == 0) ready.push({unit_epoch[s], first_position[s], s});
    }
  }
  DYNVM_GRAPH_CHECK(emitted == num_units, "build_outer_graph: the groups form a cycle");
  std::vector<Value*> outputs;
  for (const Value* v : graph.outputs()) outputs.push_back(lookup(v));
  out.set_outputs(std::move(outputs));
  return out;
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
#pragma GCC diagnostic pop
#endif

std::string to_text(const Graph& graph, const FusionPlan& plan) {
  ValueNames names(graph);
  std::string text;
  for (const FusionGroup& group : plan.groups) {
    auto list = [](const std::vector<int64_t>& items) {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + std::to_string(items[i]);
      return out + "]";
    };
    text += "group " + std::to_string(group.id) + ": " +
            std::string(fusion_group_kind_name(group.kind)) + " " + list(group.sizes);
    if (group.kind == FusionGroupKind::Reduction) {
      text += " over " + list(group.reduction_dims) + " (" + std::to_string(group.numel) + " x " +
              std::to_string(group.reduction_numel) + ")";
    }
    text += ", " + std::to_string(group.nodes.size()) +
            (group.nodes.size() == 1 ? " node" : " nodes") + "\n  inputs: (";
    for (size_t i = 0; i < group.inputs.size(); ++i)
      text += (i ? ", " : "") + names(group.inputs[i]);
    text += ")\n  outputs: (";
    for (size_t i = 0; i < group.outputs.size(); ++i)
      text += (i ? ", " : "") + names(group.outputs[i]);
    text += ")\n";
    std::string body = to_text(extract_group(graph, group));
    size_t start = 0;
    while (start < body.size()) {
      size_t end = body.find('\n', start);
      if (end == std::string::npos) end = body.size();
      text += "  " + body.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return text;
}

DotOptions fusion_dot_options(const FusionPlan& plan) {
  DotOptions options;
  options.group_of = [&plan](const Node& node) { return plan.group_of(node); };
  options.is_extern = [&plan](const Node& node) {
    return plan.group_of(node) < 0 && primitive_kind(node) != PrimitiveKind::View;
  };
  return options;
}

}  // namespace dynvm::graph
