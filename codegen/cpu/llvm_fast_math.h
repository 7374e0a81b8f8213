// Vectorizable float32 exp, expm1, log, tanh, erf and sigmoid emitted as LLVM IR (private
// to the CPU target; accuracy in docs/loop_ir.md). Each works on float or <N x float>.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace dynvm::codegen::fast_math {

llvm::Value* exp(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* expm1(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* log(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* tanh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* erf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* sigmoid(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace dynvm::codegen::fast_math
