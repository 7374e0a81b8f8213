// Building glue programs: one instruction per call, values numbered as they are defined.
#include "dynvm/codegen/glue_ir.h"

#include <utility>

namespace dynvm::codegen {

int GlueProgram::define(GlueInstr instr) {
  body.push_back(std::move(instr));
  return next_value_++;
}

int GlueProgram::param(int64_t index) {
  GlueInstr instr;
  instr.op = GlueOp::Param;
  instr.immediate = index;
  return define(std::move(instr));
}

int GlueProgram::constant(int64_t word) {
  GlueInstr instr;
  instr.op = GlueOp::Const;
  instr.immediate = word;
  return define(std::move(instr));
}

int GlueProgram::load(int address, int64_t offset) {
  GlueInstr instr;
  instr.op = GlueOp::Load;
  instr.operands = {address};
  instr.immediate = offset;
  return define(std::move(instr));
}

int GlueProgram::load32(int address, int64_t offset) {
  GlueInstr instr;
  instr.op = GlueOp::Load32;
  instr.operands = {address};
  instr.immediate = offset;
  return define(std::move(instr));
}

int GlueProgram::bit_and(int a, int b) {
  GlueInstr instr;
  instr.op = GlueOp::And;
  instr.operands = {a, b};
  return define(std::move(instr));
}

int GlueProgram::call(int helper, std::vector<int> arguments) {
  GlueInstr instr;
  instr.op = GlueOp::Call;
  instr.helper = helper;
  instr.operands = std::move(arguments);
  return define(std::move(instr));
}

int GlueProgram::slot_address(int64_t slot) {
  GlueInstr instr;
  instr.op = GlueOp::SlotAddr;
  instr.immediate = slot;
  return define(std::move(instr));
}

void GlueProgram::store(int64_t slot, int value) {
  GlueInstr instr;
  instr.op = GlueOp::Store;
  instr.immediate = slot;
  instr.operands = {value};
  body.push_back(std::move(instr));
}

namespace {

GlueInstr check(GlueOp op, std::vector<int> operands, int64_t fail_code) {
  GlueInstr instr;
  instr.op = op;
  instr.operands = std::move(operands);
  instr.fail_code = fail_code;
  return instr;
}

}  // namespace

void GlueProgram::check_eq(int a, int b, int64_t fail_code) {
  body.push_back(check(GlueOp::CheckEq, {a, b}, fail_code));
}

void GlueProgram::check_ne(int a, int b, int64_t fail_code) {
  body.push_back(check(GlueOp::CheckNe, {a, b}, fail_code));
}

void GlueProgram::check_nonzero(int a, int64_t fail_code) {
  body.push_back(check(GlueOp::CheckNonZero, {a}, fail_code));
}

void GlueProgram::check_ult(int a, int b, int64_t fail_code) {
  body.push_back(check(GlueOp::CheckUlt, {a, b}, fail_code));
}

int GlueProgram::add_helper(const std::string& helper_name, int arity, const void* address) {
  std::string unique = helper_name;
  for (int suffix = 2;; ++suffix) {
    bool taken = false;
    for (size_t i = 0; i < helpers.size(); ++i) {
      if (helpers[i].name != unique) continue;
      if (helpers[i].arity == arity && helpers[i].address == address) return static_cast<int>(i);
      taken = true;
    }
    if (!taken) break;
    unique = helper_name + "_" + std::to_string(suffix);
  }
  helpers.push_back(GlueHelper{unique, arity, address});
  return static_cast<int>(helpers.size()) - 1;
}

}  // namespace dynvm::codegen
