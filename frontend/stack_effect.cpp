// Stack effects of CPython 3.11's and 3.12's instructions, as each version's compiler
// (and so dis.stack_effect) computes them.
#include "dynvm/frontend/stack_effect.h"

#include <algorithm>
#include <string_view>

namespace dynvm::frontend {
namespace {

// Effect when the jump is not taken and when it is (equal for non-jumps).
struct Effect {
  int not_taken;
  int taken;
};
constexpr Effect same(int n) { return {n, n}; }

int make_function_inputs(int oparg) {
  return ((oparg & 0x01) != 0) + ((oparg & 0x02) != 0) + ((oparg & 0x04) != 0) +
         ((oparg & 0x08) != 0);
}

// Effects that are the same in 3.11 and 3.12.
std::optional<Effect> common_effect(Opcode op, int oparg) {
  switch (op) {
    case Opcode::CACHE:
    case Opcode::NOP:
    case Opcode::EXTENDED_ARG:
    case Opcode::RESUME:
    case Opcode::SWAP:
    case Opcode::UNARY_NEGATIVE:
    case Opcode::UNARY_NOT:
    case Opcode::UNARY_INVERT:
    case Opcode::GET_ITER:
    case Opcode::GET_YIELD_FROM_ITER:
    case Opcode::SETUP_ANNOTATIONS:
    case Opcode::YIELD_VALUE:
    case Opcode::DELETE_NAME:
    case Opcode::DELETE_GLOBAL:
    case Opcode::DELETE_FAST:
    case Opcode::CHECK_EXC_MATCH:
    case Opcode::CHECK_EG_MATCH:
    case Opcode::JUMP_FORWARD:
    case Opcode::JUMP_BACKWARD:
    case Opcode::JUMP_BACKWARD_NO_INTERRUPT:
    case Opcode::RETURN_GENERATOR:
    case Opcode::KW_NAMES:
    case Opcode::MAKE_CELL:
    case Opcode::DELETE_DEREF:
    case Opcode::COPY_FREE_VARS:
    case Opcode::GET_AWAITABLE:
    case Opcode::GET_AITER:
      return same(0);
    case Opcode::POP_TOP:
    case Opcode::BINARY_SUBSCR:
    case Opcode::RETURN_VALUE:
    case Opcode::POP_EXCEPT:
    case Opcode::STORE_NAME:
    case Opcode::DELETE_ATTR:
    case Opcode::STORE_GLOBAL:
    case Opcode::COMPARE_OP:
    case Opcode::IS_OP:
    case Opcode::CONTAINS_OP:
    case Opcode::IMPORT_NAME:
    case Opcode::RERAISE:
    case Opcode::STORE_FAST:
    case Opcode::STORE_DEREF:
    case Opcode::BINARY_OP:
    case Opcode::LIST_APPEND:
    case Opcode::SET_ADD:
    case Opcode::LIST_EXTEND:
    case Opcode::SET_UPDATE:
    case Opcode::DICT_MERGE:
    case Opcode::DICT_UPDATE:
      return same(-1);
    case Opcode::PUSH_NULL:
    case Opcode::LOAD_BUILD_CLASS:
    case Opcode::LOAD_ASSERTION_ERROR:
    case Opcode::LOAD_CONST:
    case Opcode::LOAD_NAME:
    case Opcode::IMPORT_FROM:
    case Opcode::LOAD_FAST:
    case Opcode::LOAD_CLOSURE:
    case Opcode::LOAD_DEREF:
    case Opcode::PUSH_EXC_INFO:
    case Opcode::WITH_EXCEPT_START:
    case Opcode::BEFORE_ASYNC_WITH:
    case Opcode::BEFORE_WITH:
    case Opcode::GET_ANEXT:
    case Opcode::COPY:
    case Opcode::GET_LEN:
    case Opcode::MATCH_MAPPING:
    case Opcode::MATCH_SEQUENCE:
    case Opcode::MATCH_KEYS:
      return same(1);
    case Opcode::STORE_ATTR:
    case Opcode::DELETE_SUBSCR:
    case Opcode::END_ASYNC_FOR:
    case Opcode::MAP_ADD:
    case Opcode::MATCH_CLASS:
      return same(-2);
    case Opcode::STORE_SUBSCR:
      return same(-3);
    case Opcode::UNPACK_SEQUENCE:
      return same(oparg - 1);
    case Opcode::UNPACK_EX:
      return same((oparg & 0xFF) + (oparg >> 8));
    case Opcode::BUILD_TUPLE:
    case Opcode::BUILD_LIST:
    case Opcode::BUILD_SET:
    case Opcode::BUILD_STRING:
      return same(1 - oparg);
    case Opcode::BUILD_MAP:
      return same(1 - 2 * oparg);
    case Opcode::BUILD_CONST_KEY_MAP:
      return same(-oparg);
    case Opcode::LOAD_GLOBAL:
      return same((oparg & 1) + 1);
    case Opcode::RAISE_VARARGS:
      return same(-oparg);
    case Opcode::CALL_FUNCTION_EX:
      return same(-2 - (oparg & 1));
    case Opcode::MAKE_FUNCTION:
      return same(-make_function_inputs(oparg));
    case Opcode::BUILD_SLICE:
      return same(oparg == 3 ? -2 : -1);
    case Opcode::FORMAT_VALUE:
      return same((oparg & 0x04) ? -1 : 0);
    default:
      return std::nullopt;
  }
}

std::optional<Effect> effect_3_11(Opcode op, int oparg) {
  switch (op) {
    case Opcode::UNARY_POSITIVE:
    case Opcode::LIST_TO_TUPLE:
    case Opcode::ASYNC_GEN_WRAP:
    case Opcode::LOAD_ATTR:
      return same(0);
    case Opcode::PRINT_EXPR:
    case Opcode::IMPORT_STAR:
    case Opcode::PREP_RERAISE_STAR:
    case Opcode::CALL:  // the callable and NULL|self (PRECALL took the arguments)
    case Opcode::POP_JUMP_FORWARD_IF_FALSE:
    case Opcode::POP_JUMP_FORWARD_IF_TRUE:
    case Opcode::POP_JUMP_FORWARD_IF_NONE:
    case Opcode::POP_JUMP_FORWARD_IF_NOT_NONE:
    case Opcode::POP_JUMP_BACKWARD_IF_FALSE:
    case Opcode::POP_JUMP_BACKWARD_IF_TRUE:
    case Opcode::POP_JUMP_BACKWARD_IF_NONE:
    case Opcode::POP_JUMP_BACKWARD_IF_NOT_NONE:
      return same(-1);
    case Opcode::LOAD_METHOD:
    case Opcode::LOAD_CLASSDEREF:
      return same(1);
    case Opcode::PRECALL:
      return same(-oparg);
    case Opcode::FOR_ITER:  // exhausted: the iterator is popped
      return Effect{1, -1};
    case Opcode::SEND:  // returned: the receiver is replaced by the value
      return Effect{0, -1};
    case Opcode::JUMP_IF_FALSE_OR_POP:
    case Opcode::JUMP_IF_TRUE_OR_POP:
      return Effect{-1, 0};
    default:
      return common_effect(op, oparg);
  }
}

std::optional<Effect> effect_3_12(Opcode op, int oparg) {
  switch (op) {
    case Opcode::RESERVED:
    case Opcode::INSTRUMENTED_INSTRUCTION:
    case Opcode::RETURN_CONST:
    case Opcode::SEND:
    case Opcode::CALL_INTRINSIC_1:
    case Opcode::LOAD_FROM_DICT_OR_GLOBALS:
    case Opcode::LOAD_FROM_DICT_OR_DEREF:
      return same(0);
    case Opcode::INTERPRETER_EXIT:
    case Opcode::END_SEND:
    case Opcode::CLEANUP_THROW:
    case Opcode::CALL_INTRINSIC_2:
    case Opcode::POP_JUMP_IF_FALSE:
    case Opcode::POP_JUMP_IF_TRUE:
    case Opcode::POP_JUMP_IF_NONE:
    case Opcode::POP_JUMP_IF_NOT_NONE:
      return same(-1);
    case Opcode::END_FOR:
    case Opcode::BINARY_SLICE:
      return same(-2);
    case Opcode::STORE_SLICE:
      return same(-4);
    case Opcode::LOAD_LOCALS:
    case Opcode::LOAD_FAST_CHECK:
    case Opcode::LOAD_FAST_AND_CLEAR:
    case Opcode::FOR_ITER:  // the compiler counts END_FOR's pops at the target
      return same(1);
    case Opcode::LOAD_ATTR:
      return same(oparg & 1);
    case Opcode::LOAD_SUPER_ATTR:
      return same((oparg & 1) - 2);
    case Opcode::CALL:
      return same(-1 - oparg);
    default:
      return common_effect(op, oparg);
  }
}

// 3.12's instrumented opcodes declare effects of their own.
std::optional<Effect> instrumented_effect_3_12(Opcode base, int oparg) {
  switch (base) {
    case Opcode::LOAD_SUPER_ATTR:
    case Opcode::RETURN_VALUE:
    case Opcode::END_FOR:
    case Opcode::END_SEND:
      return effect_3_12(base, oparg);
    default:
      return same(0);
  }
}

std::optional<Effect> pseudo_effect_3_12(std::string_view name) {
  if (name == "JUMP" || name == "JUMP_NO_INTERRUPT") return same(0);
  if (name == "LOAD_METHOD") return same(1);
  if (name == "LOAD_SUPER_METHOD" || name == "LOAD_ZERO_SUPER_METHOD" ||
      name == "LOAD_ZERO_SUPER_ATTR" || name == "STORE_FAST_MAYBE_NULL") {
    return same(-1);
  }
  return std::nullopt;  // the SETUP_* and POP_BLOCK pseudo ops have none
}

std::string_view pseudo_name_3_12(int opcode) {
#define DYNVM_OPCODE(number, name, base, caches, jump, arg)
#define DYNVM_PSEUDO_OPCODE(number, name) \
  if (opcode == (number)) return #name;
#include "opcodes_3_12.def"
#undef DYNVM_OPCODE
  return {};
}

std::optional<int> pick(std::optional<Effect> effect, std::optional<bool> jump) {
  if (!effect) return std::nullopt;
  if (!jump) return std::max(effect->not_taken, effect->taken);
  return *jump ? effect->taken : effect->not_taken;
}

}  // namespace

std::optional<int> stack_effect(PythonVersion version, int opcode, int oparg,
                                std::optional<bool> jump) {
  if (!is_supported_version(version)) return std::nullopt;
  const bool py312 = version.minor == 12;
  if (opcode >= 256) {
    if (!py312) return std::nullopt;
    std::string_view name = pseudo_name_3_12(opcode);
    return name.empty() ? std::nullopt : pick(pseudo_effect_3_12(name), jump);
  }
  if (opcode < 0) return std::nullopt;
  const OpcodeInfo& info = opcode_table(version)[static_cast<uint8_t>(opcode)];
  if (!info.valid) return std::nullopt;
  if (!info.has_arg()) oparg = 0;
  if (info.name != opcode_name(info.base)) {
    // Specialised forms have no effect of their own; instrumented ones (3.12) do.
    if (py312 && info.name.substr(0, 13) == "INSTRUMENTED_") {
      return pick(instrumented_effect_3_12(info.base, oparg), jump);
    }
    return std::nullopt;
  }
  return stack_effect(version, info.base, oparg, jump);
}

std::optional<int> stack_effect(PythonVersion version, Opcode opcode, int oparg,
                                std::optional<bool> jump) {
  if (!is_supported_version(version)) return std::nullopt;
  if (!opcode_table(version).byte_of(opcode)) return std::nullopt;
  if (version.minor == 12) return pick(effect_3_12(opcode, oparg), jump);
  return pick(effect_3_11(opcode, oparg), jump);
}

}  // namespace dynvm::frontend
