// The loop IR's text printer: deterministic, renumbering values in definition order.
#include "dynvm/codegen/loop_ir_printer.h"

#include <charconv>
#include <cmath>
#include <string>
#include <unordered_map>

namespace dynvm::codegen {

namespace {

class Printer {
 public:
  Printer(const LoopKernel& kernel, bool run_time_sizes)
      : kernel_(kernel), run_time_sizes_(run_time_sizes) {}

  std::string print() {
    out_ += "kernel " + kernel_.name + "(";
    for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
      const LoopBuffer& b = kernel_.buffers[i];
      if (i) out_ += ", ";
      bool run_time = run_time_sizes_ && b.role != BufferRole::Temp;
      out_ += "@" + b.name + ": " + std::string(graph::dtype_short_name(b.dtype)) + "[" +
              (run_time ? "?" : std::to_string(b.num_elements)) + "] " +
              std::string(buffer_role_name(b.role));
    }
    out_ += ") {\n";
    print_block(kernel_.body, 1);
    out_ += "}\n";
    return out_;
  }

 private:
  std::string define(ValueId id, bool loop_var) {
    std::string name =
        loop_var ? "%i" + std::to_string(num_vars_++) : "%" + std::to_string(num_values_++);
    names_[id] = name;
    return name;
  }

  std::string ref(ValueId id) const {
    auto it = names_.find(id);
    return it == names_.end() ? "%?" + std::to_string(id) : it->second;
  }

  static std::string literal(const LoopStmt& s) {
    if (!graph::is_floating(s.type)) return std::to_string(s.integer);
    if (std::isnan(s.real)) return "nan";
    if (std::isinf(s.real)) return s.real > 0 ? "inf" : "-inf";
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), s.real);
    std::string text(buffer, result.ptr);
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    return text;
  }

  std::string index(const AffineIndex& index) const {
    std::string text;
    for (const AffineIndex::Term& t : index.terms) {
      if (!text.empty()) text += " + ";
      if (t.coefficient != 1) text += std::to_string(t.coefficient) + "*";
      text += ref(t.value);
    }
    if (index.offset != 0 || index.terms.empty()) {
      if (!text.empty()) text += " + ";
      text += std::to_string(index.offset);
    }
    return text;
  }

  void indent(int depth) { out_.append(static_cast<size_t>(depth) * 2, ' '); }

  std::string loop_header(const LoopStmt& s) {
    std::string text;
    for (size_t i = 0; i < s.vars.size(); ++i) {
      if (i) text += ", ";
      bool run_time = run_time_sizes_ && s.kind == LoopStmtKind::For && s.parallel;
      text += define(s.vars[i], true) + " in 0.." +
              (run_time ? std::string("?") : std::to_string(s.extents[i]));
    }
    return text;
  }

  void print_block(const LoopBlock& block, int depth) {
    for (const auto& stmt : block) print_stmt(*stmt, depth);
  }

  void print_stmt(const LoopStmt& s, int depth) {
    indent(depth);
    switch (s.kind) {
      case LoopStmtKind::Instr: {
        std::string name = define(s.result, false);
        out_ += name + ": " + std::string(graph::dtype_short_name(s.type)) + " = " +
                std::string(loop_op_name(s.op));
        if (s.op == LoopOp::Const) {
          out_ += " " + literal(s);
        } else if (s.op == LoopOp::Load) {
          out_ += " @" + kernel_.buffers.at(static_cast<size_t>(s.buffer)).name + "[" +
                  index(s.index) + "]";
        } else {
          for (size_t i = 0; i < s.operands.size(); ++i) {
            out_ += (i ? ", " : " ") + ref(s.operands[i]);
          }
        }
        out_ += "\n";
        break;
      }
      case LoopStmtKind::Store:
        out_ += "store @" + kernel_.buffers.at(static_cast<size_t>(s.buffer)).name + "[" +
                index(s.index) + "] = " + ref(s.operands.at(0)) + "\n";
        break;
      case LoopStmtKind::For:
        out_ += std::string(s.parallel ? "parallel " : "") + "for " + loop_header(s) + " {\n";
        print_block(s.body, depth + 1);
        indent(depth);
        out_ += "}\n";
        break;
      case LoopStmtKind::Reduce: {
        // The result is named before the body, where it is printed, but defined after it.
        std::string name = define(s.result, false);
        out_ += name + ": " + std::string(graph::dtype_short_name(s.type)) + " = reduce " +
                std::string(reduce_kind_name(s.reduce)) + " for " + loop_header(s) + " {\n";
        print_block(s.body, depth + 1);
        indent(depth + 1);
        out_ += "yield " + ref(s.yield) + "\n";
        indent(depth);
        out_ += "}\n";
        break;
      }
    }
  }

  const LoopKernel& kernel_;
  bool run_time_sizes_;  // code_text: sizes the generated code takes at run time as `?`
  std::string out_;
  std::unordered_map<ValueId, std::string> names_;
  int num_values_ = 0;
  int num_vars_ = 0;
};

}  // namespace

std::string to_text(const LoopKernel& kernel) { return Printer(kernel, false).print(); }

std::string code_text(const LoopKernel& kernel) { return Printer(kernel, true).print(); }

}  // namespace dynvm::codegen
