// Glue IR to LLVM IR: words are i64, addresses are made with inttoptr, every check is a
// conditional branch to a shared exit block whose phi collects the failure code.
#ifdef DYNVM_HAVE_LLVM

#include "glue/lower_glue_to_llvm.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>

#include <vector>

namespace dynvm::codegen {

namespace {

class GlueLowering {
 public:
  GlueLowering(const GlueProgram& program, llvm::LLVMContext& context, const std::string& symbol,
               bool symbolic_helpers)
      : program_(program),
        ctx_(context),
        b_(context),
        module_(std::make_unique<llvm::Module>(symbol, context)),
        symbolic_helpers_(symbolic_helpers) {
    ptr_ = llvm::PointerType::get(ctx_, 0);
    i64_ = b_.getInt64Ty();
    auto* type = llvm::FunctionType::get(i64_, {ptr_, ptr_}, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, symbol, module_.get());
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    params_ = fn_->getArg(0);
    params_->setName("params");
    slots_ = fn_->getArg(1);
    slots_->setName("slots");
    // The slots and params arrays do not alias each other or anything a helper sees.
    fn_->addParamAttr(0, llvm::Attribute::NoAlias);
    fn_->addParamAttr(1, llvm::Attribute::NoAlias);
  }

  std::unique_ptr<llvm::Module> lower() {
    llvm::BasicBlock* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    exit_ = llvm::BasicBlock::Create(ctx_, "fail", fn_);
    b_.SetInsertPoint(exit_);
    code_ = b_.CreatePHI(i64_, 4, "code");
    b_.CreateRet(code_);
    b_.SetInsertPoint(entry);
    values_.reserve(static_cast<size_t>(program_.value_count()));
    for (const GlueInstr& instr : program_.body) emit(instr);
    b_.CreateRet(b_.getInt64(kGluePassed));
    if (code_->getNumIncomingValues() == 0) {
      // No checks: the failure block is unreachable.
      code_->eraseFromParent();
      exit_->eraseFromParent();
    }
    return std::move(module_);
  }

 private:
  llvm::Value* operand(const GlueInstr& instr, size_t i) {
    return values_[static_cast<size_t>(instr.operands[i])];
  }

  llvm::Value* address(llvm::Value* word, int64_t offset) {
    llvm::Value* base = b_.CreateIntToPtr(word, ptr_);
    if (offset == 0) return base;
    return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), base, static_cast<uint64_t>(offset));
  }

  llvm::FunctionCallee helper(int index) {
    const GlueHelper& h = program_.helpers[static_cast<size_t>(index)];
    std::vector<llvm::Type*> args(static_cast<size_t>(h.arity), i64_);
    auto* type = llvm::FunctionType::get(i64_, args, false);
    if (symbolic_helpers_) return module_->getOrInsertFunction(h.name, type);
    llvm::Value* target = b_.CreateIntToPtr(
        b_.getInt64(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h.address))), ptr_, h.name);
    return llvm::FunctionCallee(type, target);
  }

  // Continues in a new block when `holds`, else leaves with `fail_code`.
  void check(llvm::Value* holds, int64_t fail_code) {
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx_, "ok", fn_, exit_);
    llvm::BasicBlock* here = b_.GetInsertBlock();
    // Guards usually hold: tell the optimizer so the failure paths move out of the way.
    llvm::MDBuilder md(ctx_);
    b_.CreateCondBr(holds, next, exit_, md.createBranchWeights(1000, 1));
    code_->addIncoming(b_.getInt64(static_cast<uint64_t>(fail_code)), here);
    b_.SetInsertPoint(next);
  }

  void emit(const GlueInstr& instr) {
    switch (instr.op) {
      case GlueOp::Param:
        values_.push_back(b_.CreateAlignedLoad(
            i64_,
            b_.CreateConstInBoundsGEP1_64(i64_, params_, static_cast<uint64_t>(instr.immediate)),
            llvm::Align(8)));
        return;
      case GlueOp::Const:
        values_.push_back(b_.getInt64(static_cast<uint64_t>(instr.immediate)));
        return;
      case GlueOp::Load:
        values_.push_back(b_.CreateLoad(i64_, address(operand(instr, 0), instr.immediate)));
        return;
      case GlueOp::Load32:
        values_.push_back(b_.CreateZExt(
            b_.CreateLoad(b_.getInt32Ty(), address(operand(instr, 0), instr.immediate)), i64_));
        return;
      case GlueOp::And:
        values_.push_back(b_.CreateAnd(operand(instr, 0), operand(instr, 1)));
        return;
      case GlueOp::Call: {
        std::vector<llvm::Value*> args;
        for (size_t i = 0; i < instr.operands.size(); ++i) args.push_back(operand(instr, i));
        llvm::CallInst* call = b_.CreateCall(helper(instr.helper), args);
        call->setDoesNotThrow();
        values_.push_back(call);
        return;
      }
      case GlueOp::SlotAddr:
        values_.push_back(b_.CreatePtrToInt(
            b_.CreateConstInBoundsGEP1_64(i64_, slots_, static_cast<uint64_t>(instr.immediate)),
            i64_));
        return;
      case GlueOp::Store:
        b_.CreateAlignedStore(
            operand(instr, 0),
            b_.CreateConstInBoundsGEP1_64(i64_, slots_, static_cast<uint64_t>(instr.immediate)),
            llvm::Align(8));
        return;
      case GlueOp::CheckEq:
        check(b_.CreateICmpEQ(operand(instr, 0), operand(instr, 1)), instr.fail_code);
        return;
      case GlueOp::CheckNe:
        check(b_.CreateICmpNE(operand(instr, 0), operand(instr, 1)), instr.fail_code);
        return;
      case GlueOp::CheckNonZero:
        check(b_.CreateICmpNE(operand(instr, 0), b_.getInt64(0)), instr.fail_code);
        return;
      case GlueOp::CheckUlt:
        check(b_.CreateICmpULT(operand(instr, 0), operand(instr, 1)), instr.fail_code);
        return;
    }
  }

  const GlueProgram& program_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  std::unique_ptr<llvm::Module> module_;
  bool symbolic_helpers_;
  llvm::Type* ptr_ = nullptr;
  llvm::IntegerType* i64_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::Argument* params_ = nullptr;
  llvm::Argument* slots_ = nullptr;
  llvm::BasicBlock* exit_ = nullptr;
  llvm::PHINode* code_ = nullptr;
  std::vector<llvm::Value*> values_;
};

}  // namespace

std::unique_ptr<llvm::Module> lower_glue_to_llvm(const GlueProgram& program,
                                                 llvm::LLVMContext& context,
                                                 const std::string& symbol, bool symbolic_helpers) {
  return GlueLowering(program, context, symbol, symbolic_helpers).lower();
}

}  // namespace dynvm::codegen

#endif  // DYNVM_HAVE_LLVM
