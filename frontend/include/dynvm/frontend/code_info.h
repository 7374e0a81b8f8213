// CodeInfo: a decoded code object, the form of bytecode the whole VM works on.
//
// Each Instruction carries three views: how CPython stores it (offset, opcode byte,
// folded argument), its argument resolved against the code object (constant, name or
// local index, jump target as an instruction index, comparison, ...), and the normalised
// op (NormalizedOp) whose meaning is the same in every Python version
// (docs/instruction_model.md). decode() (decode.h) builds it from a RawCode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/frontend/exception_table.h"
#include "dynvm/frontend/location_table.h"
#include "dynvm/frontend/opcode.h"
#include "dynvm/frontend/raw_code.h"

namespace dynvm::frontend {

// CO_* code flags.
enum CodeFlag : uint32_t {
  kCoOptimized = 0x1,
  kCoNewLocals = 0x2,
  kCoVarargs = 0x4,
  kCoVarkeywords = 0x8,
  kCoNested = 0x10,
  kCoGenerator = 0x20,
  kCoNoFree = 0x40,
  kCoCoroutine = 0x80,
  kCoIterableCoroutine = 0x100,
  kCoAsyncGenerator = 0x200,
};

// The normalised instruction set (ops.def).
enum class Op : uint8_t {
#define DYNVM_OP(name, operands, meaning) name,
#include "dynvm/frontend/ops.def"
};
std::string_view op_name(Op op);

// NormalizedOp::flags bits.
enum OpFlag : uint8_t {
  kOpPushNull = 0x1,     // LoadGlobal: push NULL first (a call follows)
  kOpMethod = 0x2,       // LoadAttr / LoadSuperAttr: push [method, self] or [NULL, attr]
  kOpTwoArgSuper = 0x4,  // LoadSuperAttr: super(class, self) rather than super()
  kOpBackward = 0x8,     // Jump: to an earlier instruction (a loop)
  kOpFormatSpec = 0x10,  // FormatValue: a format spec is on the stack
};

// What the VM executes for one instruction; same meaning in every version.
struct NormalizedOp {
  Op op = Op::Nop;
  int32_t arg = 0;      // a count, a kind (BinaryOp, CompareOp, ...) or flags
  int32_t index = -1;   // into consts, names or localsplus, per op; -1 when none
  int32_t target = -1;  // instruction index the op continues at when it jumps
  uint8_t flags = 0;    // OpFlag bits
  // Where CPython's evaluator must resume to execute this instruction: the first
  // EXTENDED_ARG prefix, or for a call the KW_NAMES / PRECALL that prepare it.
  int32_t resume_index = -1;
};

// Bits of Instruction::arg_flags, decoded from the argument.
enum ArgFlag : uint8_t {
  kArgPushNull = 0x1,     // LOAD_GLOBAL: arg & 1
  kArgMethod = 0x2,       // 3.12+ LOAD_ATTR / LOAD_SUPER_ATTR: arg & 1; 3.11 LOAD_METHOD
  kArgTwoArgSuper = 0x4,  // LOAD_SUPER_ATTR: arg & 2
  kArgFormatSpec = 0x8,   // FORMAT_VALUE: arg & 4
  kArgToBool = 0x10,      // 3.13 COMPARE_OP: arg & 16, the result is converted to bool
};

struct Instruction {
  // --- As CPython stores it.
  uint32_t offset = 0;    // byte offset of the opcode in co_code
  uint16_t size = 1;      // code units: the instruction and its inline caches
  uint8_t code_byte = 0;  // the opcode byte (may be specialised or instrumented)
  Opcode opcode{};        // the base instruction
  ArgKind arg_kind = ArgKind::kNone;
  uint32_t arg = 0;  // the argument with EXTENDED_ARG prefixes folded in; 0 if none
  bool has_arg() const { return arg_kind != ArgKind::kNone; }
  std::string_view name() const { return opcode_name(opcode); }  // "LOAD_ATTR"

  // --- The argument resolved against the code object.
  int32_t index = -1;        // const, name or localsplus index named by the argument
  int32_t jump_target = -1;  // jump target's instruction index
  uint32_t jump_target_offset = 0;
  // CompareOp, BinaryOp, Intrinsic1/2, FORMAT_VALUE or CONVERT_VALUE conversion, or a
  // local pair's second localsplus index (the first is `index`)
  uint8_t arg_value = 0;
  uint8_t arg_flags = 0;  // ArgFlag bits
  int32_t second_index() const { return arg_kind == ArgKind::kLocalPair ? arg_value : -1; }
  CompareOp compare_op() const { return static_cast<CompareOp>(arg_value); }
  BinaryOp binary_op() const { return static_cast<BinaryOp>(arg_value); }
  Intrinsic1 intrinsic1() const { return static_cast<Intrinsic1>(arg_value); }
  Intrinsic2 intrinsic2() const { return static_cast<Intrinsic2>(arg_value); }

  Positions positions;          // of the instruction's first code unit
  bool is_jump_target = false;  // some jump instruction lands here (handlers not counted)
  // Among the jump targets, this one's number in offset order from 1 (3.13's dis calls it
  // L<label>); 0 when no jump lands here.
  int32_t label = 0;

  // --- What the VM executes.
  NormalizedOp norm;
};

// One slot of "localsplus": arguments and locals, then cells, then free variables.
struct LocalSlot {
  std::string name;
  uint8_t kind = 0;  // LocalKind bits
  bool is_local() const { return kind & kLocalKindLocal; }
  bool is_cell() const { return kind & kLocalKindCell; }
  bool is_free() const { return kind & kLocalKindFree; }
  // 3.12: a temporary of an inlined comprehension, invisible to locals().
  bool is_hidden() const { return kind & kLocalKindHidden; }
};

struct CodeInfo;
// A code object among another's constants, decoded.
struct NestedCode {
  int32_t const_index = -1;
  std::shared_ptr<const CodeInfo> code;
};

struct CodeInfo {
  PythonVersion version;
  std::string name;
  std::string qualname;
  std::string filename;
  int firstlineno = 0;
  uint32_t flags = 0;  // CodeFlag bits
  int argcount = 0;    // positional, including positional-only
  int posonlyargcount = 0;
  int kwonlyargcount = 0;
  int stacksize = 0;
  bool has_varargs() const { return flags & kCoVarargs; }
  bool has_varkeywords() const { return flags & kCoVarkeywords; }
  bool is_generator() const { return flags & kCoGenerator; }
  bool is_coroutine() const { return flags & kCoCoroutine; }
  bool is_async_generator() const { return flags & kCoAsyncGenerator; }
  // Every parameter, *args and **kwargs included: the first slots of localsplus.
  int total_argcount() const {
    return argcount + kwonlyargcount + (has_varargs() ? 1 : 0) + (has_varkeywords() ? 1 : 0);
  }

  std::vector<ConstantPtr> consts;
  std::vector<std::string> names;
  std::vector<LocalSlot> localsplus;
  // Indices into localsplus, as CPython's co_varnames, co_cellvars, co_freevars list them
  // (an argument that is also a cell appears in varnames and cellvars).
  std::vector<int32_t> varnames;
  std::vector<int32_t> cellvars;
  std::vector<int32_t> freevars;

  std::vector<Instruction> instructions;
  std::vector<ExceptionTableEntry> exception_table;
  std::vector<LocationEntry> locations;
  uint32_t code_units = 0;  // co_code's length in 16-bit units

  // Code objects among consts, decoded, in consts order (decode_recursive only).
  std::vector<NestedCode> nested;

  // Whether every Instruction::norm is filled (normalize.h): only for the versions the VM
  // executes (is_executable_version); decode_recursive lists others without.
  bool normalized = false;

  // Index of the instruction that starts at a byte offset, or -1.
  int32_t instruction_at(uint32_t offset) const;
  // The handler entry covering a byte offset, or nullptr (entries do not overlap).
  const ExceptionTableEntry* handler_at(uint32_t offset) const;
  // The local's name for a localsplus index, or "" when out of range.
  std::string_view local_name(int32_t index) const;
};

}  // namespace dynvm::frontend
