// The dis-shaped text and JSON listings of decoded code, and a listing of normalised ops.
#include "dynvm/frontend/dis_listing.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string_view>

namespace dynvm::frontend {
namespace {

constexpr std::string_view kFormatConversions[] = {"", "str", "repr", "ascii"};
constexpr std::string_view kMakeFunctionFlags[] = {"defaults", "kwdefaults", "annotations",
                                                   "closure"};
constexpr int kOpnameWidth = 20;  // dis._OPNAME_WIDTH
constexpr int kOpargWidth = 5;    // dis._OPARG_WIDTH

// dis prints the argument as a C int: EXTENDED_ARG chains past 2**31 wrap around.
long long shown_arg(const Instruction& ins) { return static_cast<int32_t>(ins.arg); }

std::string name_at(const std::vector<std::string>& names, int32_t index) {
  if (index < 0 || static_cast<size_t>(index) >= names.size()) return {};
  return names[static_cast<size_t>(index)];
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}
std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
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
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// The lines dis.findlinestarts reports: offset -> line where a new line begins.
std::map<uint32_t, int> line_starts(const CodeInfo& code) {
  std::map<uint32_t, int> starts;
  bool have_last = false;
  int last = 0;
  for (const auto& entry : code.locations) {
    if (entry.start >= code.code_units) break;
    int line = entry.positions.line;
    if (entry.form == LocationForm::kNone || line < 0) continue;
    if (!have_last || line != last) {
      starts[entry.start * 2] = line;
      last = line;
      have_last = true;
    }
  }
  return starts;
}

// dis's argrepr with each constant's repr computed once: listings show the same
// constant many times, and a repr can be long.
class ArgreprCache {
 public:
  explicit ArgreprCache(const CodeInfo& code) : code_(code), reprs_(code.consts.size()) {}
  std::string operator()(const Instruction& ins) {
    auto index = static_cast<size_t>(ins.index);
    bool plain_constant = ins.opcode == Opcode::LOAD_CONST || ins.opcode == Opcode::RETURN_CONST;
    if (!plain_constant || index >= reprs_.size()) return dis_argrepr(code_, ins);
    if (!reprs_[index]) reprs_[index] = dis_argrepr(code_, ins);
    return *reprs_[index];
  }

 private:
  const CodeInfo& code_;
  std::vector<std::optional<std::string>> reprs_;
};

// Code objects depth-first from `code`, each with the repr dis prints for it.
void collect(const CodeInfo& code, std::vector<std::pair<const CodeInfo*, std::string>>& out,
             std::string repr) {
  out.emplace_back(&code, std::move(repr));
  for (const auto& nested : code.nested) {
    if (!nested.code) continue;
    std::string nested_repr;
    auto index = static_cast<size_t>(nested.const_index);
    if (index < code.consts.size() && code.consts[index]) nested_repr = code.consts[index]->repr();
    collect(*nested.code, out, nested_repr);
  }
}

void format_one_text(const CodeInfo& code, std::string& out) {
  const auto starts = line_starts(code);
  int lineno_width = 0;
  if (!starts.empty()) {
    int max_line = 0;
    for (const auto& [offset, line] : starts) max_line = std::max(max_line, line);
    lineno_width = max_line >= 1000 ? static_cast<int>(std::to_string(max_line).size()) : 3;
  }
  const long long max_offset = static_cast<long long>(code.code_units) * 2 - 2;
  const size_t offset_width = max_offset >= 10000 ? std::to_string(max_offset).size() : size_t{4};
  ArgreprCache argrepr(code);
  std::set<uint32_t> handler_targets;
  for (const auto& entry : code.exception_table) {
    if (entry.start < entry.end) handler_targets.insert(entry.target);
  }
  for (const auto& ins : code.instructions) {
    auto start = starts.find(ins.offset);
    bool starts_line = start != starts.end();
    if (lineno_width && starts_line && ins.offset > 0) out += '\n';
    std::string line;
    if (lineno_width) {
      line += starts_line ? pad_left(std::to_string(start->second), lineno_width)
                          : std::string(lineno_width, ' ');
      line += ' ';
    }
    line += "   ";
    line += ins.is_jump_target || handler_targets.count(ins.offset) ? " >>" : "   ";
    line += ' ';
    line += pad_left(std::to_string(ins.offset), offset_width);
    line += ' ';
    line += pad_right(std::string(opcode_name(ins.opcode)), kOpnameWidth);
    if (ins.has_arg()) {
      line += ' ';
      line += pad_left(std::to_string(shown_arg(ins)), kOpargWidth);
      std::string text = argrepr(ins);
      if (!text.empty()) line += " (" + text + ")";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  if (!code.exception_table.empty()) {
    out += "ExceptionTable:\n";
    for (const auto& e : code.exception_table) {
      out += "  " + std::to_string(e.start) + " to " +
             std::to_string(static_cast<long long>(e.end) - 2) + " -> " + std::to_string(e.target) +
             " [" + std::to_string(e.depth) + "]" + (e.lasti ? " lasti" : "") + "\n";
    }
  }
}

// 3.13's dis.findlinestarts: where co_lines() changes line, a stretch without a line
// (-1 here) counting as one.
std::map<uint32_t, int> line_starts_3_13(const CodeInfo& code) {
  std::map<uint32_t, int> starts;
  bool have_last = false;
  int last = 0;
  for (const auto& entry : code.locations) {
    if (entry.start >= code.code_units) break;
    int line =
        entry.form == LocationForm::kNone || entry.positions.line < 0 ? -1 : entry.positions.line;
    if (!have_last || line != last) {
      starts[entry.start * 2] = line;
      last = line;
      have_last = true;
    }
  }
  return starts;
}

// The text of 3.13's dis.dis(): no offsets, a label column naming jump targets and the
// exception table's offsets (L1, L2, ... in offset order), and jumps and the exception
// table written with those labels.
void format_one_text_3_13(const CodeInfo& code, std::string& out) {
  const auto starts = line_starts_3_13(code);
  int max_line = -1;
  bool has_no_line = false;
  for (const auto& [offset, line] : starts) {
    if (line > 0) max_line = std::max(max_line, line);
    if (line < 0) has_no_line = true;
  }
  constexpr std::string_view kNoLine = "  --";
  size_t lineno_width = 0;
  if (max_line > 0) {
    lineno_width = std::max<size_t>(3, std::to_string(max_line).size());
    if (lineno_width < kNoLine.size() && has_no_line) lineno_width = kNoLine.size();
  }
  std::map<uint32_t, int> labels;
  for (const auto& ins : code.instructions) {
    if (ins.is_jump_target) labels[ins.offset] = 0;
  }
  for (const auto& entry : code.exception_table) {
    labels[entry.start] = labels[entry.end] = labels[entry.target] = 0;
  }
  int next_label = 0;
  for (auto& [offset, label] : labels) label = ++next_label;
  auto label_of = [&](uint32_t offset) { return "L" + std::to_string(labels[offset]); };
  const size_t label_width = 4 + std::to_string(labels.size()).size();

  ArgreprCache argrepr(code);
  for (const auto& ins : code.instructions) {
    auto start = starts.find(ins.offset);
    const bool starts_line = start != starts.end();
    if (lineno_width && starts_line && ins.offset > 0) out += '\n';
    std::string line;
    if (lineno_width) {
      if (!starts_line) {
        line += std::string(lineno_width, ' ');
      } else {
        line += pad_left(start->second < 0 ? std::string(kNoLine) : std::to_string(start->second),
                         lineno_width);
      }
      line += ' ';
    }
    auto label = labels.find(ins.offset);
    line += label != labels.end() ? pad_left(label_of(ins.offset) + ":", label_width)
                                  : std::string(label_width, ' ');
    line += "     ";  // the current-instruction column between two separators
    const std::string_view name = opcode_name(ins.opcode);
    line += pad_right(std::string(name), kOpnameWidth);
    if (ins.has_arg()) {
      // A name longer than the column takes room from the argument's.
      const size_t name_width = kOpnameWidth, arg_column = kOpargWidth;
      const size_t excess = name.size() > name_width ? name.size() - name_width : 0;
      const size_t arg_width = excess < arg_column ? arg_column - excess : 0;
      line += ' ';
      line += pad_left(std::to_string(shown_arg(ins)), arg_width);
      std::string text =
          ins.arg_kind == ArgKind::kJump ? "to " + label_of(ins.jump_target_offset) : argrepr(ins);
      if (!text.empty()) line += " (" + text + ")";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  if (!code.exception_table.empty()) {
    out += "ExceptionTable:\n";
    for (const auto& e : code.exception_table) {
      out += "  " + label_of(e.start) + " to " + label_of(e.end) + " -> " + label_of(e.target) +
             " [" + std::to_string(e.depth) + "]" + (e.lasti ? " lasti" : "") + "\n";
    }
  }
}

void format_one_json(const CodeInfo& code, std::string& out) {
  ArgreprCache argrepr(code);
  out += "{\"qualname\": ";
  append_json_string(out, code.qualname);
  out += ", \"firstlineno\": " + std::to_string(code.firstlineno);
  out += ", \"instructions\": [";
  for (size_t i = 0; i < code.instructions.size(); ++i) {
    const auto& ins = code.instructions[i];
    out += i ? ",\n  " : "\n  ";
    out += "{\"offset\": " + std::to_string(ins.offset) + ", \"opname\": ";
    append_json_string(out, opcode_name(ins.opcode));
    out += ", \"arg\": " + (ins.has_arg() ? std::to_string(shown_arg(ins)) : "null");
    out += ", \"argval\": ";
    append_json_string(out, argrepr(ins));
    out +=
        ", \"line\": " + (ins.positions.line >= 0 ? std::to_string(ins.positions.line) : "null") +
        "}";
  }
  out += "], \"exception_table\": [";
  for (size_t i = 0; i < code.exception_table.size(); ++i) {
    const auto& e = code.exception_table[i];
    out += i ? ", " : "";
    out += "{\"start\": " + std::to_string(e.start) + ", \"end\": " + std::to_string(e.end) +
           ", \"target\": " + std::to_string(e.target) + ", \"depth\": " + std::to_string(e.depth) +
           ", \"lasti\": " + (e.lasti ? "true" : "false") + "}";
  }
  out += "]}";
}

}  // namespace

std::string dis_argrepr(const CodeInfo& code, const Instruction& ins) {
  switch (ins.arg_kind) {
    case ArgKind::kNone:
    case ArgKind::kInt:
      return {};
    case ArgKind::kConst: {
      // 3.11's dis shows only LOAD_CONST's constant; 3.12's every hasconst one's.
      if (ins.opcode == Opcode::KW_NAMES && code.version.minor < 12) return {};
      auto index = static_cast<size_t>(ins.index);
      if (index >= code.consts.size()) return {};
      return code.consts[index] ? code.consts[index]->repr() : "<NULL>";
    }
    case ArgKind::kName:
      return name_at(code.names, ins.index);
    // 3.13 pushes the NULL (or self) after the callable, and its dis says so.
    case ArgKind::kGlobalName: {
      std::string name = name_at(code.names, ins.index);
      if (!(ins.arg_flags & kArgPushNull) || name.empty()) return name;
      return code.version.minor >= 13 ? name + " + NULL" : "NULL + " + name;
    }
    case ArgKind::kAttrName:
    case ArgKind::kSuperAttrName: {
      std::string name = name_at(code.names, ins.index);
      if (!(ins.arg_flags & kArgMethod) || name.empty()) return name;
      return code.version.minor >= 13 ? name + " + NULL|self" : "NULL|self + " + name;
    }
    case ArgKind::kLocal:
    case ArgKind::kCell:
      return std::string(code.local_name(ins.index));
    case ArgKind::kLocalPair:
      return std::string(code.local_name(ins.index)) + ", " +
             std::string(code.local_name(ins.second_index()));
    case ArgKind::kJump: {
      // 3.13 names jump targets by label; decode() numbered them.
      if (code.version.minor < 13) return "to " + std::to_string(ins.jump_target_offset);
      auto target = static_cast<size_t>(ins.jump_target);
      if (target >= code.instructions.size()) return {};
      return "to L" + std::to_string(code.instructions[target].label);
    }
    case ArgKind::kCompare: {
      std::string symbol(compare_op_symbol(ins.compare_op()));
      return ins.arg_flags & kArgToBool ? "bool(" + symbol + ")" : symbol;
    }
    case ArgKind::kBinaryOp:
      return std::string(binary_op_symbol(ins.binary_op()));
    case ArgKind::kIntrinsic1:
      return std::string(intrinsic1_name(ins.intrinsic1()));
    case ArgKind::kIntrinsic2:
      return std::string(intrinsic2_name(ins.intrinsic2()));
    case ArgKind::kConvertValue:
      return std::string(kFormatConversions[ins.arg_value & 3]);
    case ArgKind::kFormatValue: {
      std::string text(kFormatConversions[ins.arg_value & 3]);
      if (ins.arg_flags & kArgFormatSpec) text += text.empty() ? "with format" : ", with format";
      return text;
    }
    case ArgKind::kMakeFunctionFlags: {
      std::string text;
      for (int bit = 0; bit < 4; ++bit) {
        if (!(ins.arg & (1u << bit))) continue;
        if (!text.empty()) text += ", ";
        text += kMakeFunctionFlags[bit];
      }
      return text;
    }
  }
  return {};
}

std::string format_dis_text(const CodeInfo& code) {
  std::vector<std::pair<const CodeInfo*, std::string>> all;
  collect(code, all, {});
  std::string out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i) out += "\nDisassembly of " + all[i].second + ":\n";
    const CodeInfo& one = *all[i].first;
    if (one.version.minor >= 13) {
      format_one_text_3_13(one, out);
    } else {
      format_one_text(one, out);
    }
  }
  return out;
}

std::string format_dis_json(const CodeInfo& code) {
  std::vector<std::pair<const CodeInfo*, std::string>> all;
  collect(code, all, {});
  std::string out = "[";
  for (size_t i = 0; i < all.size(); ++i) {
    out += i ? ",\n" : "\n";
    format_one_json(*all[i].first, out);
  }
  out += "\n]\n";
  return out;
}

std::string format_normalized(const CodeInfo& code) {
  if (!code.normalized) {
    return "not normalised: the VM does not execute Python " + code.version.to_string() +
           " bytecode\n";
  }
  std::string out;
  for (size_t i = 0; i < code.instructions.size(); ++i) {
    const auto& ins = code.instructions[i];
    const auto& n = ins.norm;
    out += pad_left(std::to_string(i), 4) + " [" + pad_left(std::to_string(ins.offset), 4) + "] " +
           std::string(op_name(n.op));
    if (n.op != Op::Nop) {
      if (n.arg != 0) out += " arg=" + std::to_string(n.arg);
      if (n.index >= 0) out += " index=" + std::to_string(n.index);
      if (n.target >= 0) out += " target=" + std::to_string(n.target);
      if (n.flags & kOpPushNull) out += " PushNull";
      if (n.flags & kOpMethod) out += " Method";
      if (n.flags & kOpTwoArgSuper) out += " TwoArgSuper";
      if (n.flags & kOpBackward) out += " Backward";
      if (n.flags & kOpFormatSpec) out += " FormatSpec";
    }
    if (n.resume_index != static_cast<int32_t>(i)) {
      out += " resume=" + std::to_string(n.resume_index);
    }
    out += "  ; " + std::string(opcode_name(ins.opcode));
    std::string argrepr = dis_argrepr(code, ins);
    if (!argrepr.empty()) out += " (" + argrepr + ")";
    out += '\n';
  }
  return out;
}

}  // namespace dynvm::frontend
