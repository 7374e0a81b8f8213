// The glue IR verifier: one pass over the body, counting the values defined so far.
#include "dynvm/codegen/glue_ir_verify.h"

#include <cctype>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "glue/glue_op_table.h"

namespace dynvm::codegen {

namespace {

bool is_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string operand_count(int n) { return std::to_string(n) + (n == 1 ? " operand" : " operands"); }

class Verifier {
 public:
  explicit Verifier(const GlueProgram& program) : program_(program) {}

  std::vector<std::string> run() {
    if (!is_identifier(program_.name)) {
      problem("the program's name '" + program_.name + "' is not an identifier");
    }
    if (program_.param_count < 0) {
      problem("param_count " + std::to_string(program_.param_count) + " is negative");
    }
    if (program_.slot_count < 0) {
      problem("slot_count " + std::to_string(program_.slot_count) + " is negative");
    }
    helpers();
    for (size_t i = 0; i < program_.body.size(); ++i) instr(i, program_.body[i]);
    // A lowering may size its table of values by value_count(); a body edited by hand can
    // define more or fewer values than the builder counted.
    if (defined_ != program_.value_count()) {
      problem("the body defines " + std::to_string(defined_) + " values but value_count() is " +
              std::to_string(program_.value_count()));
    }
    return problems_;
  }

 private:
  void problem(const std::string& message) { problems_.push_back(message); }

  void helpers() {
    std::set<std::string> names;
    for (size_t i = 0; i < program_.helpers.size(); ++i) {
      const GlueHelper& helper = program_.helpers[i];
      std::string where = "helper " + std::to_string(i) + " '" + helper.name + "'";
      if (!is_identifier(helper.name)) problem(where + ": the name is not an identifier");
      if (!names.insert(helper.name).second) problem(where + ": the name is used twice");
      if (helper.arity < 0) {
        problem(where + ": arity " + std::to_string(helper.arity) + " is negative");
      }
    }
  }

  void instr(size_t index, const GlueInstr& instr) {
    const GlueOpInfo* info = glue_op_info(instr.op);
    if (!info) {
      problem("instruction " + std::to_string(index) + ": unknown op " +
              std::to_string(static_cast<int>(instr.op)));
      return;
    }
    std::string where =
        "instruction " + std::to_string(index) + " (" + std::string(info->name) + ")";
    operands(where, instr, info->operands);
    switch (instr.op) {
      case GlueOp::Param:
        in_range(where, "param index", instr.immediate, program_.param_count);
        break;
      case GlueOp::Store:
      case GlueOp::SlotAddr:
        in_range(where, "slot", instr.immediate, program_.slot_count);
        break;
      case GlueOp::Load:
      case GlueOp::Load32:
        if (instr.immediate < 0) {
          problem(where + ": offset " + std::to_string(instr.immediate) + " is negative");
        }
        break;
      case GlueOp::CheckEq:
      case GlueOp::CheckNe:
      case GlueOp::CheckNonZero:
      case GlueOp::CheckUlt:
        // Negative results are not failures: -1 is kGluePassed.
        if (instr.fail_code < 0) {
          problem(where + ": failure code " + std::to_string(instr.fail_code) + " is negative");
        }
        break;
      case GlueOp::Const:
      case GlueOp::And:
      case GlueOp::Call:
        break;
    }
    if (instr.defines_value()) ++defined_;
  }

  // The operand count (a call's from its helper, when the helper exists) and that each operand
  // was defined by an earlier instruction: values are numbered in definition order, so those
  // are exactly the numbers below the count of definitions so far.
  void operands(const std::string& where, const GlueInstr& instr, int expected) {
    if (instr.op == GlueOp::Call) {
      if (instr.helper < 0 || static_cast<size_t>(instr.helper) >= program_.helpers.size()) {
        problem(where + ": helper " + std::to_string(instr.helper) + " out of range (" +
                std::to_string(program_.helpers.size()) + " helpers)");
        expected = kGlueHelperArity;
      } else {
        int arity = program_.helpers[static_cast<size_t>(instr.helper)].arity;
        expected = arity < 0 ? kGlueHelperArity : arity;  // a negative arity is reported above
      }
    }
    if (expected != kGlueHelperArity && static_cast<int>(instr.operands.size()) != expected) {
      problem(where + ": takes " + operand_count(expected) + ", has " +
              std::to_string(instr.operands.size()));
    }
    for (int v : instr.operands) {
      if (v < 0 || v >= defined_) {
        problem(where + ": operand %" + std::to_string(v) +
                " is not defined by an earlier instruction");
      }
    }
  }

  void in_range(const std::string& where, const char* what, int64_t value, int count) {
    if (value < 0 || value >= count) {
      problem(where + ": " + what + " " + std::to_string(value) + " is outside [0, " +
              std::to_string(count) + ")");
    }
  }

  const GlueProgram& program_;
  int defined_ = 0;  // values defined by the instructions so far
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> verify_glue_program(const GlueProgram& program) {
  return Verifier(program).run();
}

}  // namespace dynvm::codegen
