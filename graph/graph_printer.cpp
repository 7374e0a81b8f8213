// Printing of graphs, nodes, types and arguments in the graph text format.
#include "dynvm/graph/graph_printer.h"

#include <charconv>
#include <cmath>
#include <ostream>

namespace dynvm::graph {

namespace {

void append_int_list(std::string& out, const std::vector<int64_t>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(items[i]);
  }
}

void append_expr_list(std::string& out, const std::vector<SymExpr>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i].to_string();
  }
}

}  // namespace

std::string format_double(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string quote_string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (byte < 0x20 || byte >= 0x7f) {
          out += "\\x";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string to_text(const ValueType& type) {
  if (type.kind != ValueKind::Tensor || !type.meta) return std::string(value_kind_name(type.kind));
  const TensorMeta& meta = *type.meta;
  std::string out(dtype_short_name(meta.dtype));
  out += '[';
  if (meta.is_symbolic()) {
    append_expr_list(out, meta.sym_sizes);
  } else {
    append_int_list(out, meta.sizes);
  }
  out += ']';
  if (!meta.has_row_major_strides()) {
    out += '{';
    if (meta.is_symbolic()) {
      append_expr_list(out, meta.sym_strides);
    } else {
      append_int_list(out, meta.strides);
    }
    out += '}';
  }
  out += ' ';
  out += to_string(meta.device);
  if (meta.requires_grad) out += " grad";
  return out;
}

std::string to_text(const Argument& argument, const ValueNames& names) {
  switch (argument.kind()) {
    case Argument::Kind::None:
      return "None";
    case Argument::Kind::Bool:
      return argument.as_bool() ? "True" : "False";
    case Argument::Kind::Int:
      return std::to_string(argument.as_int());
    case Argument::Kind::Double:
      return format_double(argument.as_double());
    case Argument::Kind::String:
      return quote_string(argument.as_string());
    case Argument::Kind::DType:
      return "torch." + std::string(dtype_name(argument.as_dtype()));
    case Argument::Kind::Device:
      return to_string(argument.as_device());
    case Argument::Kind::MemoryFormat:
      return "torch." + std::string(memory_format_name(argument.as_memory_format()));
    case Argument::Kind::Layout:
      return "torch." + std::string(layout_name(argument.as_layout()));
    case Argument::Kind::Value:
      return names(argument.as_value());
    case Argument::Kind::SymInt:
      return "sym(" + argument.as_sym_int().to_string() + ")";
    case Argument::Kind::List: {
      std::string out = "[";
      const auto& items = argument.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += to_text(items[i], names);
      }
      return out + "]";
    }
  }
  return "?";
}

std::string to_text(const Node& node, const ValueNames& names) {
  std::string out;
  for (size_t i = 0; i < node.num_outputs(); ++i) {
    if (i > 0) out += ", ";
    out += names(node.output(i)) + ": " + to_text(node.output(i)->type());
  }
  if (node.num_outputs() > 0) out += " = ";
  out += node.op() + "(";
  bool first = true;
  for (const Argument& a : node.args()) {
    if (!first) out += ", ";
    first = false;
    out += to_text(a, names);
  }
  for (const KeywordArgument& k : node.kwargs()) {
    if (!first) out += ", ";
    first = false;
    out += k.name + "=" + to_text(k.value, names);
  }
  return out + ")";
}

std::string to_text(const Graph& graph) {
  ValueNames names(graph);
  std::string out;
  for (size_t i = 0; i < graph.symbols().size(); ++i) {
    const GraphSymbol& symbol = graph.symbols()[i];
    out += "symbol s" + std::to_string(i) + " = " + std::to_string(symbol.hint) + " from " +
           quote_string(symbol.source) + "\n";
  }
  for (const SymRelation& relation : graph.relations()) {
    out += "assume " + relation.to_string() + "\n";
  }
  out += "graph(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    if (i > 0) out += ", ";
    const Value* input = graph.inputs()[i];
    out += names(input) + ": " + to_text(input->type());
  }
  out += "):\n";
  for (const Node* node : graph.nodes()) out += "  " + to_text(*node, names) + "\n";
  out += "  return (";
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    if (i > 0) out += ", ";
    out += names(graph.outputs()[i]);
  }
  out += ")\n";
  return out;
}

std::ostream& operator<<(std::ostream& out, const Graph& graph) { return out << to_text(graph); }

}  // namespace dynvm::graph
