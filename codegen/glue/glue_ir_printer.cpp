// The glue IR's text printer: one line per instruction, values named in definition order.
#include "dynvm/codegen/glue_ir.h"

#include <charconv>
#include <cstdint>
#include <string>

#include "glue/glue_op_table.h"

namespace dynvm::codegen {

namespace {

// Small words (counts, offsets, small integers) read best in decimal; addresses, masks and
// negative words as the 64-bit pattern the JIT compares against.
std::string word_text(int64_t word) {
  if (word >= 0 && word <= 0xffff) return std::to_string(word);
  char digits[16];
  auto result = std::to_chars(digits, digits + sizeof(digits), static_cast<uint64_t>(word), 16);
  return "0x" + std::string(digits, result.ptr);
}

std::string value_text(int value) { return "%" + std::to_string(value); }

// Operands are value numbers already (the k-th definition is %k), so a program that the
// builder made prints without renaming. A broken program still prints, so that the
// verifier's messages can be read next to it.
void print_instr(const GlueProgram& program, const GlueInstr& instr, int defined,
                 std::string& out) {
  const GlueOpInfo* info = glue_op_info(instr.op);
  out += "  ";
  if (instr.defines_value()) out += value_text(defined) + " = ";
  if (!info) {
    out += "<op " + std::to_string(static_cast<int>(instr.op)) + ">\n";
    return;
  }
  out += info->name;
  auto operand = [&](size_t i) {
    return i < instr.operands.size() ? value_text(instr.operands[i]) : std::string("%?");
  };
  switch (instr.op) {
    case GlueOp::Param:
    case GlueOp::SlotAddr:
      out += " " + std::to_string(instr.immediate);
      break;
    case GlueOp::Const:
      out += " " + word_text(instr.immediate);
      break;
    case GlueOp::Load:
    case GlueOp::Load32:
      out += " " + operand(0) + ", " + std::to_string(instr.immediate);
      break;
    case GlueOp::Store:
      out += " " + std::to_string(instr.immediate) + ", " + operand(0);
      break;
    case GlueOp::Call: {
      bool known = instr.helper >= 0 && static_cast<size_t>(instr.helper) < program.helpers.size();
      out += " " + (known ? program.helpers[static_cast<size_t>(instr.helper)].name
                          : "?" + std::to_string(instr.helper));
      out += "(";
      for (size_t i = 0; i < instr.operands.size(); ++i) {
        if (i) out += ", ";
        out += value_text(instr.operands[i]);
      }
      out += ")";
      break;
    }
    case GlueOp::And:
    case GlueOp::CheckEq:
    case GlueOp::CheckNe:
    case GlueOp::CheckNonZero:
    case GlueOp::CheckUlt:
      // Operand lists of a fixed length: as many as the op takes, or as many as there are.
      for (size_t i = 0; i < instr.operands.size() || i < static_cast<size_t>(info->operands);
           ++i) {
        out += i ? ", " : " ";
        out += operand(i);
      }
      if (instr.op != GlueOp::And) out += " else " + std::to_string(instr.fail_code);
      break;
  }
  out += "\n";
}

}  // namespace

std::string to_text(const GlueProgram& program) {
  std::string out = "glue " + program.name + " params " + std::to_string(program.param_count) +
                    " slots " + std::to_string(program.slot_count) + "\n";
  for (const GlueHelper& helper : program.helpers) {
    out += "helper " + helper.name + " " + std::to_string(helper.arity) + "\n";
  }
  int defined = 0;
  for (const GlueInstr& instr : program.body) {
    print_instr(program, instr, defined, out);
    if (instr.defines_value()) ++defined;
  }
  out += "end\n";
  return out;
}

}  // namespace dynvm::codegen
