// The glue IR's operations as the text form spells them, listed once for the printer, the
// parser and the verifier. Private to codegen/.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "dynvm/codegen/glue_ir.h"

namespace dynvm::codegen {

// The operand count of a call is its helper's arity, not a constant.
constexpr int kGlueHelperArity = -1;

struct GlueOpInfo {
  GlueOp op;
  std::string_view name;
  int operands;  // how many value operands the op takes, or kGlueHelperArity
};

// In GlueOp's order, so that kGlueOps[static_cast<size_t>(op)] describes `op`.
inline constexpr GlueOpInfo kGlueOps[] = {
    {GlueOp::Param, "param", 0},
    {GlueOp::Const, "const", 0},
    {GlueOp::Load, "load", 1},
    {GlueOp::Load32, "load32", 1},
    {GlueOp::And, "and", 2},
    {GlueOp::Call, "call", kGlueHelperArity},
    {GlueOp::Store, "store", 1},
    {GlueOp::CheckEq, "check_eq", 2},
    {GlueOp::CheckNe, "check_ne", 2},
    {GlueOp::CheckNonZero, "check_nonzero", 1},
    {GlueOp::CheckUlt, "check_ult", 2},
    {GlueOp::SlotAddr, "slot_addr", 0},
};

inline constexpr size_t kGlueOpCount = sizeof(kGlueOps) / sizeof(kGlueOps[0]);

// nullptr for a byte that is no GlueOp (a program edited by hand may hold one).
inline const GlueOpInfo* glue_op_info(GlueOp op) {
  size_t index = static_cast<size_t>(op);
  return index < kGlueOpCount ? &kGlueOps[index] : nullptr;
}

inline std::optional<GlueOp> parse_glue_op(std::string_view name) {
  for (const GlueOpInfo& info : kGlueOps) {
    if (info.name == name) return info.op;
  }
  return std::nullopt;
}

// Whether an instruction of `op` defines a value, as GlueInstr::defines_value says.
inline bool glue_op_defines_value(GlueOp op) {
  GlueInstr instr;
  instr.op = op;
  return instr.defines_value();
}

// Whether the table above is in GlueOp's order; checked once at compile time.
constexpr bool glue_op_table_in_order() {
  for (size_t i = 0; i < kGlueOpCount; ++i) {
    if (static_cast<size_t>(kGlueOps[i].op) != i) return false;
  }
  return true;
}
static_assert(glue_op_table_in_order(), "kGlueOps must list the ops in GlueOp's order");
static_assert(kGlueOpCount == static_cast<size_t>(GlueOp::SlotAddr) + 1,
              "kGlueOps must list every GlueOp");

}  // namespace dynvm::codegen
