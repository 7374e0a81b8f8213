// Graphviz (DOT) rendering of a graph, with optional clusters for fused groups.
#include "dynvm/graph/graph_dot.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "dynvm/graph/fusion_partition.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/value_names.h"

namespace dynvm::graph {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string to_dot(const Graph& graph, const DotOptions& options) {
  ValueNames names(graph);
  std::string out = "digraph \"" + escape(options.graph_name) + "\" {\n";
  out += "  node [shape=box, fontname=\"monospace\"];\n";

  // DOT ids by value id: "in3" for inputs, "n7" (program position) for node outputs.
  std::vector<std::string> source_of(graph.num_values());
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* input = graph.inputs()[i];
    source_of[input->id()] = "in" + std::to_string(i);
    out += "  in" + std::to_string(i) + " [label=\"" +
           escape(names(input) + "\n" + to_text(input->type())) +
           "\", shape=ellipse, style=filled, fillcolor=lightblue];\n";
  }

  std::vector<const Node*> order;
  std::map<int, std::vector<size_t>> groups;  // ordered by group number
  for (const Node* node : graph.nodes()) {
    size_t position = order.size();
    order.push_back(node);
    for (const Value* v : node->outputs()) source_of[v->id()] = "n" + std::to_string(position);
    bool is_extern = options.is_extern && options.is_extern(*node);
    const Argument* fused_group = node->op() == kFusedOp ? node->kwarg("group") : nullptr;
    std::string label = node->op();
    std::string style;
    if (fused_group != nullptr && fused_group->kind() == Argument::Kind::Int) {
      label = "fused group " + std::to_string(fused_group->as_int());
      style = ", style=\"filled,bold\", fillcolor=lightyellow";
    } else if (is_extern) {
      label = "extern " + label;
      style = ", style=filled, fillcolor=lightsalmon";
    }
    for (const Value* v : node->outputs()) label += "\n" + names(v) + ": " + to_text(v->type());
    out += "  n" + std::to_string(position) + " [label=\"" + escape(label) + "\"" + style + "];\n";
    int group = options.group_of ? options.group_of(*node) : -1;
    if (group >= 0) groups[group].push_back(position);
  }
  for (const auto& [group, members] : groups) {
    out += "  subgraph cluster_" + std::to_string(group) + " {\n";
    std::string note = options.group_note ? options.group_note(group) : "";
    out += "    label=\"" +
           escape("group " + std::to_string(group) + (note.empty() ? "" : ": " + note)) +
           "\"; style=dashed;\n";
    for (size_t position : members) out += "    n" + std::to_string(position) + ";\n";
    out += "  }\n";
  }

  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    out += "  out" + std::to_string(i) + " [label=\"return " + std::to_string(i) +
           "\", shape=ellipse, style=filled, fillcolor=palegreen];\n";
  }

  // One edge per (value, reader); the label names the value when its producer has
  // several outputs. Values the graph does not define draw no edge.
  auto edge = [&](const Value* v, const std::string& target, std::set<std::string>& drawn) {
    if (!graph.owns(v) || source_of[v->id()].empty()) return;
    std::string line = "  " + source_of[v->id()] + " -> " + target;
    const Node* producer = v->producer();
    if (producer != nullptr && producer->num_outputs() > 1) {
      line += " [label=\"" + escape(names(v)) + "\"]";
    }
    if (drawn.insert(line).second) out += line + ";\n";
  };
  for (size_t position = 0; position < order.size(); ++position) {
    std::set<std::string> drawn;
    order[position]->for_each_input(
        [&](const Value* v) { edge(v, "n" + std::to_string(position), drawn); });
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    std::set<std::string> drawn;
    edge(graph.outputs()[i], "out" + std::to_string(i), drawn);
  }
  out += "}\n";
  return out;
}

}  // namespace dynvm::graph
