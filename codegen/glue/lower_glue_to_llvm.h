// Lowering a glue program to an LLVM IR function (private to the CPU target).
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "dynvm/codegen/glue_ir.h"

namespace dynvm::codegen {

// Emits `i64 symbol(ptr params, ptr slots)`: one basic block per stretch between checks,
// each failing check branching to a block that returns its code, helpers called through
// their addresses as constants (or, when `symbolic_helpers`, as declared external functions
// named after the helpers, which keeps the IR independent of the process for golden tests).
// The program must verify (verify_glue_program).
std::unique_ptr<llvm::Module> lower_glue_to_llvm(const GlueProgram& program,
                                                 llvm::LLVMContext& context,
                                                 const std::string& symbol,
                                                 bool symbolic_helpers = false);

}  // namespace dynvm::codegen
