// Lowering a loop IR kernel to an LLVM IR function (private to the CPU target).
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "dynvm/codegen/loop_ir.h"

namespace dynvm::codegen {

// Emits `void symbol(void** buffers, const int64_t* dims, int64_t begin, int64_t end)`,
// running iterations [begin, end) of the kernel's parallel loop (`dims` is reserved for
// symbolic sizes). Innermost loops are vectorized explicitly with `lanes` lanes (a vector
// main loop plus a scalar remainder); lanes == 1 emits scalar code only.
std::unique_ptr<llvm::Module> lower_loops_to_llvm(const LoopKernel& kernel,
                                                  llvm::LLVMContext& context,
                                                  const std::string& symbol, int lanes);

}  // namespace dynvm::codegen
