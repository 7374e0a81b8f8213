// normalize: maps each decoded CPython instruction to the normalised op the VM executes,
// folding away the differences between 3.11 and 3.12 (docs/instruction_model.md).
#include "dynvm/frontend/normalize.h"

#include <string>
#include <string_view>
#include <utility>

namespace dynvm::frontend {
namespace {

// Whether `operands` (a space-separated list from ops.def) names `word`.
constexpr bool has_operand(std::string_view operands, std::string_view word) {
  size_t start = 0;
  while (start <= operands.size()) {
    size_t end = operands.find(' ', start);
    if (end == std::string_view::npos) end = operands.size();
    if (operands.substr(start, end - start) == word) return true;
    start = end + 1;
  }
  return false;
}

constexpr std::string_view kOperands[] = {
#define DYNVM_OP(name, operands, meaning) operands,
#include "dynvm/frontend/ops.def"
};

// Clears the fields an op does not read, so that each field means one thing.
void keep_documented_operands(NormalizedOp& norm) {
  std::string_view operands = kOperands[static_cast<size_t>(norm.op)];
  if (!has_operand(operands, "arg")) norm.arg = 0;
  if (!has_operand(operands, "index")) norm.index = -1;
  if (!has_operand(operands, "target")) norm.target = -1;
}

class Normalizer {
 public:
  explicit Normalizer(CodeInfo& code) : code_(code), instructions_(code.instructions) {}

  std::optional<Error> run() {
    for (size_t i = 0; i < instructions_.size(); ++i) {
      auto index = static_cast<int32_t>(i);
      Instruction& ins = instructions_[i];
      NormalizedOp& norm = ins.norm;
      norm = NormalizedOp{};
      norm.arg = static_cast<int32_t>(ins.arg);
      norm.index = ins.index;
      norm.target = ins.jump_target;
      norm.resume_index = index;
      // An instruction resumes at its first EXTENDED_ARG prefix, which sets its argument.
      if (i > 0 && instructions_[i - 1].opcode == Opcode::EXTENDED_ARG) {
        norm.resume_index = instructions_[i - 1].norm.resume_index;
      }
      if (auto error = map(index, ins, norm)) return error;
      keep_documented_operands(norm);
    }
    return std::nullopt;
  }

 private:
  Error fail_at(const Instruction& ins, const std::string& what) const {
    return make_error("code object '" + code_.qualname + "' (" + code_.filename + "): " + what +
                      " at offset " + std::to_string(ins.offset));
  }

  // The instruction before `index`, skipping its EXTENDED_ARG prefixes; -1 at the start.
  int32_t previous(int32_t index) const {
    return instructions_[static_cast<size_t>(index)].norm.resume_index - 1;
  }

  // A call's set-up instructions: 3.11 runs KW_NAMES? PRECALL CALL, 3.12 KW_NAMES? CALL.
  void attach_call_setup(int32_t index, NormalizedOp& norm) {
    norm.index = -1;
    int32_t before = previous(index);
    if (before >= 0 && instructions_[static_cast<size_t>(before)].opcode == Opcode::PRECALL) {
      norm.resume_index = instructions_[static_cast<size_t>(before)].norm.resume_index;
      before = previous(before);
    }
    if (before >= 0 && instructions_[static_cast<size_t>(before)].opcode == Opcode::KW_NAMES) {
      const Instruction& kw_names = instructions_[static_cast<size_t>(before)];
      norm.index = kw_names.index;
      norm.resume_index = kw_names.norm.resume_index;
    }
  }

  // 3.12 FOR_ITER and SEND jump to an END_FOR / END_SEND that their exits skip (FOR_ITER)
  // or that drops the receiver (SEND); the normalised target is the instruction after it.
  std::optional<Error> skip_end_marker(const Instruction& ins, NormalizedOp& norm, Opcode marker) {
    if (code_.version.minor < 12) return std::nullopt;
    const auto target = static_cast<size_t>(ins.jump_target);
    if (target >= instructions_.size() || instructions_[target].opcode != marker ||
        target + 1 >= instructions_.size()) {
      return fail_at(ins, std::string(opcode_name(ins.opcode)) + " does not jump to " +
                              std::string(opcode_name(marker)));
    }
    norm.target = static_cast<int32_t>(target + 1);
    return std::nullopt;
  }

  static void set(NormalizedOp& norm, Op op) { norm.op = op; }

  std::optional<Error> map(int32_t index, const Instruction& ins, NormalizedOp& norm) {
    switch (ins.opcode) {
      // Nothing to do: prefixes and call set-up, whose effect rides on the CALL.
      case Opcode::NOP:
      case Opcode::EXTENDED_ARG:
      case Opcode::PRECALL:
      case Opcode::KW_NAMES:
        set(norm, Op::Nop);
        break;
      case Opcode::RESUME:
        set(norm, Op::Resume);
        break;

      case Opcode::POP_TOP:
        set(norm, Op::PopTop);
        break;
      case Opcode::PUSH_NULL:
        set(norm, Op::PushNull);
        break;
      case Opcode::COPY:
        set(norm, Op::Copy);
        break;
      case Opcode::SWAP:
        set(norm, Op::Swap);
        break;
      case Opcode::END_FOR:
        set(norm, Op::EndFor);
        break;

      case Opcode::LOAD_CONST:
        set(norm, Op::LoadConst);
        break;
      case Opcode::RETURN_VALUE:
        set(norm, Op::Return);
        norm.index = -1;
        break;
      case Opcode::RETURN_CONST:
        set(norm, Op::Return);
        break;

      case Opcode::LOAD_FAST:
      case Opcode::LOAD_FAST_CHECK:
        set(norm, Op::LoadFast);
        break;
      case Opcode::LOAD_FAST_AND_CLEAR:
        set(norm, Op::LoadFastAndClear);
        break;
      case Opcode::STORE_FAST:
        set(norm, Op::StoreFast);
        break;
      case Opcode::DELETE_FAST:
        set(norm, Op::DeleteFast);
        break;
      case Opcode::MAKE_CELL:
        set(norm, Op::MakeCell);
        break;
      case Opcode::LOAD_CLOSURE:
        set(norm, Op::LoadClosure);
        break;
      case Opcode::LOAD_DEREF:
        set(norm, Op::LoadDeref);
        break;
      case Opcode::STORE_DEREF:
        set(norm, Op::StoreDeref);
        break;
      case Opcode::DELETE_DEREF:
        set(norm, Op::DeleteDeref);
        break;
      case Opcode::COPY_FREE_VARS:
        set(norm, Op::CopyFreeVars);
        break;
      case Opcode::LOAD_CLASSDEREF:
        set(norm, Op::LoadClassDeref);
        break;
      case Opcode::LOAD_LOCALS:
        set(norm, Op::LoadLocals);
        break;
      case Opcode::LOAD_FROM_DICT_OR_DEREF:
        set(norm, Op::LoadFromDictOrDeref);
        break;
      case Opcode::LOAD_FROM_DICT_OR_GLOBALS:
        set(norm, Op::LoadFromDictOrGlobals);
        break;

      case Opcode::LOAD_NAME:
        set(norm, Op::LoadName);
        break;
      case Opcode::STORE_NAME:
        set(norm, Op::StoreName);
        break;
      case Opcode::DELETE_NAME:
        set(norm, Op::DeleteName);
        break;
      case Opcode::LOAD_GLOBAL:
        set(norm, Op::LoadGlobal);
        if (ins.arg_flags & kArgPushNull) norm.flags |= kOpPushNull;
        break;
      case Opcode::STORE_GLOBAL:
        set(norm, Op::StoreGlobal);
        break;
      case Opcode::DELETE_GLOBAL:
        set(norm, Op::DeleteGlobal);
        break;
      case Opcode::LOAD_ATTR:
      case Opcode::LOAD_METHOD:
        set(norm, Op::LoadAttr);
        if (ins.arg_flags & kArgMethod) norm.flags |= kOpMethod;
        break;
      case Opcode::LOAD_SUPER_ATTR:
        set(norm, Op::LoadSuperAttr);
        if (ins.arg_flags & kArgMethod) norm.flags |= kOpMethod;
        if (ins.arg_flags & kArgTwoArgSuper) norm.flags |= kOpTwoArgSuper;
        break;
      case Opcode::STORE_ATTR:
        set(norm, Op::StoreAttr);
        break;
      case Opcode::DELETE_ATTR:
        set(norm, Op::DeleteAttr);
        break;

      case Opcode::UNARY_POSITIVE:
        set(norm, Op::UnaryPositive);
        break;
      case Opcode::UNARY_NEGATIVE:
        set(norm, Op::UnaryNegative);
        break;
      case Opcode::UNARY_NOT:
        set(norm, Op::UnaryNot);
        break;
      case Opcode::UNARY_INVERT:
        set(norm, Op::UnaryInvert);
        break;
      case Opcode::BINARY_OP:
        set(norm, Op::BinaryOp);
        norm.arg = ins.arg_value;
        break;
      case Opcode::BINARY_SUBSCR:
        set(norm, Op::BinarySubscr);
        break;
      case Opcode::STORE_SUBSCR:
        set(norm, Op::StoreSubscr);
        break;
      case Opcode::DELETE_SUBSCR:
        set(norm, Op::DeleteSubscr);
        break;
      case Opcode::BINARY_SLICE:
        set(norm, Op::BinarySlice);
        break;
      case Opcode::STORE_SLICE:
        set(norm, Op::StoreSlice);
        break;
      case Opcode::BUILD_SLICE:
        set(norm, Op::BuildSlice);
        break;
      case Opcode::COMPARE_OP:
        set(norm, Op::CompareOp);
        norm.arg = ins.arg_value;
        break;
      case Opcode::IS_OP:
        set(norm, Op::IsOp);
        break;
      case Opcode::CONTAINS_OP:
        set(norm, Op::ContainsOp);
        break;

      case Opcode::JUMP_FORWARD:
      case Opcode::JUMP_BACKWARD:
      case Opcode::JUMP_BACKWARD_NO_INTERRUPT:
        set(norm, Op::Jump);
        if (ins.jump_target <= index) norm.flags |= kOpBackward;
        break;
      case Opcode::POP_JUMP_FORWARD_IF_FALSE:
      case Opcode::POP_JUMP_BACKWARD_IF_FALSE:
      case Opcode::POP_JUMP_IF_FALSE:
        set(norm, Op::PopJumpIfFalse);
        break;
      case Opcode::POP_JUMP_FORWARD_IF_TRUE:
      case Opcode::POP_JUMP_BACKWARD_IF_TRUE:
      case Opcode::POP_JUMP_IF_TRUE:
        set(norm, Op::PopJumpIfTrue);
        break;
      case Opcode::POP_JUMP_FORWARD_IF_NONE:
      case Opcode::POP_JUMP_BACKWARD_IF_NONE:
      case Opcode::POP_JUMP_IF_NONE:
        set(norm, Op::PopJumpIfNone);
        break;
      case Opcode::POP_JUMP_FORWARD_IF_NOT_NONE:
      case Opcode::POP_JUMP_BACKWARD_IF_NOT_NONE:
      case Opcode::POP_JUMP_IF_NOT_NONE:
        set(norm, Op::PopJumpIfNotNone);
        break;
      case Opcode::JUMP_IF_FALSE_OR_POP:
        set(norm, Op::JumpIfFalseOrPop);
        break;
      case Opcode::JUMP_IF_TRUE_OR_POP:
        set(norm, Op::JumpIfTrueOrPop);
        break;

      case Opcode::GET_ITER:
        set(norm, Op::GetIter);
        break;
      case Opcode::GET_YIELD_FROM_ITER:
        set(norm, Op::GetYieldFromIter);
        break;
      case Opcode::FOR_ITER:
        set(norm, Op::ForIter);
        return skip_end_marker(ins, norm, Opcode::END_FOR);
      case Opcode::YIELD_VALUE:
        set(norm, Op::YieldValue);
        break;
      case Opcode::SEND:
        set(norm, Op::Send);
        return skip_end_marker(ins, norm, Opcode::END_SEND);
      case Opcode::END_SEND:
        set(norm, Op::EndSend);
        break;
      case Opcode::RETURN_GENERATOR:
        set(norm, Op::ReturnGenerator);
        break;
      case Opcode::GET_AWAITABLE:
        set(norm, Op::GetAwaitable);
        break;
      case Opcode::GET_AITER:
        set(norm, Op::GetAiter);
        break;
      case Opcode::GET_ANEXT:
        set(norm, Op::GetAnext);
        break;
      case Opcode::END_ASYNC_FOR:
        set(norm, Op::EndAsyncFor);
        break;
      case Opcode::BEFORE_ASYNC_WITH:
        set(norm, Op::BeforeAsyncWith);
        break;
      case Opcode::BEFORE_WITH:
        set(norm, Op::BeforeWith);
        break;
      case Opcode::WITH_EXCEPT_START:
        set(norm, Op::WithExceptStart);
        break;
      case Opcode::CLEANUP_THROW:
        set(norm, Op::CleanupThrow);
        break;
      case Opcode::ASYNC_GEN_WRAP:
        set(norm, Op::AsyncGenWrap);
        break;

      case Opcode::CALL:
        set(norm, Op::Call);
        attach_call_setup(index, norm);
        break;
      case Opcode::CALL_FUNCTION_EX:
        set(norm, Op::CallFunctionEx);
        break;
      case Opcode::CALL_INTRINSIC_1:
        norm.arg = ins.arg_value;
        switch (ins.intrinsic1()) {
          case Intrinsic1::INTRINSIC_UNARY_POSITIVE:
            set(norm, Op::UnaryPositive);
            break;
          case Intrinsic1::INTRINSIC_LIST_TO_TUPLE:
            set(norm, Op::ListToTuple);
            break;
          case Intrinsic1::INTRINSIC_ASYNC_GEN_WRAP:
            set(norm, Op::AsyncGenWrap);
            break;
          default:
            set(norm, Op::CallIntrinsic1);
            break;
        }
        break;
      case Opcode::CALL_INTRINSIC_2:
        norm.arg = ins.arg_value;
        if (ins.intrinsic2() == Intrinsic2::INTRINSIC_PREP_RERAISE_STAR) {
          set(norm, Op::PrepReraiseStar);
        } else {
          set(norm, Op::CallIntrinsic2);
        }
        break;
      case Opcode::LIST_TO_TUPLE:
        set(norm, Op::ListToTuple);
        break;
      case Opcode::PREP_RERAISE_STAR:
        set(norm, Op::PrepReraiseStar);
        break;
      case Opcode::PRINT_EXPR:
        set(norm, Op::PrintExpr);
        break;
      case Opcode::IMPORT_STAR:
        set(norm, Op::ImportStar);
        break;

      case Opcode::MAKE_FUNCTION:
        set(norm, Op::MakeFunction);
        break;
      case Opcode::BUILD_TUPLE:
        set(norm, Op::BuildTuple);
        break;
      case Opcode::BUILD_LIST:
        set(norm, Op::BuildList);
        break;
      case Opcode::BUILD_SET:
        set(norm, Op::BuildSet);
        break;
      case Opcode::BUILD_MAP:
        set(norm, Op::BuildMap);
        break;
      case Opcode::BUILD_CONST_KEY_MAP:
        set(norm, Op::BuildConstKeyMap);
        break;
      case Opcode::BUILD_STRING:
        set(norm, Op::BuildString);
        break;
      case Opcode::LIST_APPEND:
        set(norm, Op::ListAppend);
        break;
      case Opcode::SET_ADD:
        set(norm, Op::SetAdd);
        break;
      case Opcode::MAP_ADD:
        set(norm, Op::MapAdd);
        break;
      case Opcode::LIST_EXTEND:
        set(norm, Op::ListExtend);
        break;
      case Opcode::SET_UPDATE:
        set(norm, Op::SetUpdate);
        break;
      case Opcode::DICT_UPDATE:
        set(norm, Op::DictUpdate);
        break;
      case Opcode::DICT_MERGE:
        set(norm, Op::DictMerge);
        break;
      case Opcode::UNPACK_SEQUENCE:
        set(norm, Op::UnpackSequence);
        break;
      case Opcode::UNPACK_EX:
        set(norm, Op::UnpackEx);
        break;
      case Opcode::FORMAT_VALUE:
        set(norm, Op::FormatValue);
        if (ins.arg_flags & kArgFormatSpec) norm.flags |= kOpFormatSpec;
        break;

      case Opcode::IMPORT_NAME:
        set(norm, Op::ImportName);
        break;
      case Opcode::IMPORT_FROM:
        set(norm, Op::ImportFrom);
        break;
      case Opcode::LOAD_BUILD_CLASS:
        set(norm, Op::LoadBuildClass);
        break;
      case Opcode::SETUP_ANNOTATIONS:
        set(norm, Op::SetupAnnotations);
        break;
      case Opcode::LOAD_ASSERTION_ERROR:
        set(norm, Op::LoadAssertionError);
        break;

      case Opcode::RAISE_VARARGS:
        set(norm, Op::RaiseVarargs);
        break;
      case Opcode::RERAISE:
        set(norm, Op::Reraise);
        break;
      case Opcode::PUSH_EXC_INFO:
        set(norm, Op::PushExcInfo);
        break;
      case Opcode::POP_EXCEPT:
        set(norm, Op::PopExcept);
        break;
      case Opcode::CHECK_EXC_MATCH:
        set(norm, Op::CheckExcMatch);
        break;
      case Opcode::CHECK_EG_MATCH:
        set(norm, Op::CheckEgMatch);
        break;

      case Opcode::MATCH_CLASS:
        set(norm, Op::MatchClass);
        break;
      case Opcode::MATCH_KEYS:
        set(norm, Op::MatchKeys);
        break;
      case Opcode::MATCH_MAPPING:
        set(norm, Op::MatchMapping);
        break;
      case Opcode::MATCH_SEQUENCE:
        set(norm, Op::MatchSequence);
        break;
      case Opcode::GET_LEN:
        set(norm, Op::GetLen);
        break;
      case Opcode::INTERPRETER_EXIT:
        set(norm, Op::InterpreterExit);
        break;

      // decode() rejects these before normalisation.
      case Opcode::CACHE:
      case Opcode::RESERVED:
      case Opcode::INSTRUMENTED_INSTRUCTION:
      case Opcode::INSTRUMENTED_LINE:
      case Opcode::ENTER_EXECUTOR:
      // 3.13's own instructions: normalize() refuses 3.13 code before it gets here.
      case Opcode::EXIT_INIT_CHECK:
      case Opcode::FORMAT_SIMPLE:
      case Opcode::FORMAT_WITH_SPEC:
      case Opcode::TO_BOOL:
      case Opcode::CALL_KW:
      case Opcode::CONVERT_VALUE:
      case Opcode::LOAD_FAST_LOAD_FAST:
      case Opcode::SET_FUNCTION_ATTRIBUTE:
      case Opcode::STORE_FAST_LOAD_FAST:
      case Opcode::STORE_FAST_STORE_FAST:
        return fail_at(ins, "cannot normalise " + std::string(opcode_name(ins.opcode)));
    }
    return std::nullopt;
  }

  CodeInfo& code_;
  std::vector<Instruction>& instructions_;
};

}  // namespace

bool is_executable_version(PythonVersion version) {
  return version == PythonVersion{3, 11} || version == PythonVersion{3, 12};
}

Expected<CodeInfo> normalize(CodeInfo code) {
  if (!is_executable_version(code.version)) {
    return make_error("code object '" + code.qualname + "': Python " + code.version.to_string() +
                      " bytecode has no normalised form (the VM executes 3.11 and 3.12)");
  }
  if (auto error = Normalizer(code).run()) return *error;
  code.normalized = true;
  return code;
}

}  // namespace dynvm::frontend
