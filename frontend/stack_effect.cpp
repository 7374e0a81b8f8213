// Stack effects of CPython 3.11's, 3.12's and 3.13's instructions, as each version's
// compiler (and so dis.stack_effect) computes them.
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

// Effects that are the same in 3.11, 3.12 and 3.13 (where the version has the opcode).
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

// 3.13 (changed effects first, then its new instructions).
std::optional<Effect> effect_3_13(Opcode op, int oparg) {
  switch (op) {
    case Opcode::END_FOR:  // only the value; a POP_TOP after it pops the iterator
    case Opcode::EXIT_INIT_CHECK:
    case Opcode::FORMAT_WITH_SPEC:
    case Opcode::SET_FUNCTION_ATTRIBUTE:
      return same(-1);
    case Opcode::MAKE_FUNCTION:  // the attributes come with SET_FUNCTION_ATTRIBUTE
    case Opcode::TO_BOOL:
    case Opcode::FORMAT_SIMPLE:
    case Opcode::CONVERT_VALUE:
    case Opcode::ENTER_EXECUTOR:
    case Opcode::STORE_FAST_LOAD_FAST:
      return same(0);
    case Opcode::RETURN_GENERATOR:
      return same(1);
    case Opcode::LOAD_FAST_LOAD_FAST:
      return same(2);
    case Opcode::STORE_FAST_STORE_FAST:
      return same(-2);
    case Opcode::CALL_KW:  // callable, self|NULL, the arguments and the names tuple
      return same(-2 - oparg);
    default:
      return effect_3_12(op, oparg);
  }
}

std::optional<Effect> base_effect(PythonVersion version, Opcode op, int oparg) {
  switch (version.minor) {
    case 11:
      return effect_3_11(op, oparg);
    case 12:
      return effect_3_12(op, oparg);
    default:
      return effect_3_13(op, oparg);
  }
}

// Instrumented opcodes (3.12+) declare effects of their own.
std::optional<Effect> instrumented_effect(PythonVersion version, Opcode base, int oparg) {
  switch (base) {
    case Opcode::LOAD_SUPER_ATTR:
    case Opcode::RETURN_VALUE:
    case Opcode::END_FOR:
    case Opcode::END_SEND:
      return base_effect(version, base, oparg);
    default:
      return same(0);
  }
}

std::optional<Effect> pseudo_effect(PythonVersion version, std::string_view name) {
  if (name == "JUMP" || name == "JUMP_NO_INTERRUPT") return same(0);
  if (name == "LOAD_METHOD" || name == "LOAD_CLOSURE") return same(1);
  if (name == "LOAD_SUPER_METHOD" || name == "LOAD_ZERO_SUPER_METHOD" ||
      name == "LOAD_ZERO_SUPER_ATTR" || name == "STORE_FAST_MAYBE_NULL") {
    return same(-1);
  }
  if (version.minor < 13) return std::nullopt;  // 3.12: the block set-up ops have none
  // 3.13: a handler's entry pushes the exception (SETUP_CLEANUP: and lasti).
  if (name == "POP_BLOCK") return same(0);
  if (name == "SETUP_FINALLY" || name == "SETUP_WITH") return Effect{0, 1};
  if (name == "SETUP_CLEANUP") return Effect{0, 2};
  return std::nullopt;
}

std::string_view pseudo_name(PythonVersion version, int opcode) {
#define DYNVM_OPCODE(number, name, base, caches, jump, arg)
#define DYNVM_PSEUDO_OPCODE(number, name) \
  if (opcode == (number)) return #name;
  if (version.minor == 12) {
#include "opcodes_3_12.def"
  } else if (version.minor == 13) {
// Defined again: each .def file undefines it at its end.
#define DYNVM_PSEUDO_OPCODE(number, name) \
  if (opcode == (number)) return #name;
#include "opcodes_3_13.def"
  }
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
  if (opcode >= 256) {
    std::string_view name = pseudo_name(version, opcode);
    return name.empty() ? std::nullopt : pick(pseudo_effect(version, name), jump);
  }
  if (opcode < 0) return std::nullopt;
  const OpcodeInfo& info = opcode_table(version)[static_cast<uint8_t>(opcode)];
  if (!info.valid) return std::nullopt;
  if (!info.has_arg()) oparg = 0;
  if (info.name != opcode_name(info.base)) {
    // Specialised forms have no effect of their own; instrumented ones (3.12+) do.
    if (info.name.substr(0, 13) == "INSTRUMENTED_") {
      return pick(instrumented_effect(version, info.base, oparg), jump);
    }
    return std::nullopt;
  }
  return stack_effect(version, info.base, oparg, jump);
}

std::optional<int> stack_effect(PythonVersion version, Opcode opcode, int oparg,
                                std::optional<bool> jump) {
  if (!is_supported_version(version)) return std::nullopt;
  if (!opcode_table(version).byte_of(opcode)) return std::nullopt;
  return pick(base_effect(version, opcode, oparg), jump);
}

}  // namespace dynvm::frontend
