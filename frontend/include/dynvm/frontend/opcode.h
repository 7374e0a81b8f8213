// Opcode: CPython's instructions under one version-independent enum, and for each
// supported version the table from opcode byte to instruction, caches, jump and argument.
//
// The lists come from the generated X-macro files opcodes.def (all versions' base
// opcodes and operator tables) and frontend/opcodes_3_XX.def (one version's bytes);
// scripts/gen_opcode_tables.py writes them from dumps of each Python's opcode module.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dynvm/frontend/raw_code.h"

// The enumerators below use CPython's names, which CPython's own opcode.h defines as
// macros; the two cannot meet in one translation unit.
#if defined(LOAD_ATTR) || defined(NB_ADD)
#error "dynvm/frontend/opcode.h cannot be included after CPython's opcode.h"
#endif

namespace dynvm::frontend {

// A base instruction of CPython 3.11, 3.12 or 3.13, named as CPython names it. Specialised
// (LOAD_ATTR_SLOT) and instrumented (INSTRUMENTED_CALL) opcodes map to their base.
enum class Opcode : uint16_t {
#define DYNVM_BASE_OPCODE(name) name,
#include "dynvm/frontend/opcodes.def"
};
inline constexpr std::size_t kOpcodeCount = 0
#define DYNVM_BASE_OPCODE(name) +1
#include "dynvm/frontend/opcodes.def"
    ;

// BINARY_OP's argument (the same numbering in 3.11 to 3.13).
enum class BinaryOp : uint8_t {
#define DYNVM_BINARY_OP(name, symbol) name,
#include "dynvm/frontend/opcodes.def"
};
inline constexpr std::size_t kBinaryOpCount = 0
#define DYNVM_BINARY_OP(name, symbol) +1
#include "dynvm/frontend/opcodes.def"
    ;

// COMPARE_OP's comparison (3.11: the argument; 3.12: the argument >> 4; 3.13: >> 5).
enum class CompareOp : uint8_t {
#define DYNVM_COMPARE_OP(name, symbol) name,
#include "dynvm/frontend/opcodes.def"
};
inline constexpr std::size_t kCompareOpCount = 0
#define DYNVM_COMPARE_OP(name, symbol) +1
#include "dynvm/frontend/opcodes.def"
    ;

// CALL_INTRINSIC_1 / CALL_INTRINSIC_2's argument (3.12+; 3.13 appended one Intrinsic2).
enum class Intrinsic1 : uint8_t {
#define DYNVM_INTRINSIC_1(name) name,
#include "dynvm/frontend/opcodes.def"
};
inline constexpr std::size_t kIntrinsic1Count = 0
#define DYNVM_INTRINSIC_1(name) +1
#include "dynvm/frontend/opcodes.def"
    ;
enum class Intrinsic2 : uint8_t {
#define DYNVM_INTRINSIC_2(name) name,
#include "dynvm/frontend/opcodes.def"
};
inline constexpr std::size_t kIntrinsic2Count = 0
#define DYNVM_INTRINSIC_2(name) +1
#include "dynvm/frontend/opcodes.def"
    ;

// How an instruction's argument encodes a jump. Relative jumps count code units from
// the end of the instruction's inline caches.
enum class JumpKind : uint8_t { kNone, kForward, kBackward, kAbsolute };

// What an instruction's argument means (after EXTENDED_ARG folding).
enum class ArgKind : uint8_t {
  kNone,           // no argument (opcode below HAVE_ARGUMENT)
  kInt,            // a count or flags, used as is
  kConst,          // index into co_consts
  kName,           // index into co_names
  kGlobalName,     // LOAD_GLOBAL: name index << 1 | push NULL
  kAttrName,       // 3.12+ LOAD_ATTR: name index << 1 | method
  kSuperAttrName,  // 3.12+ LOAD_SUPER_ATTR: name index << 2 | two-argument super << 1 | method
  kLocal,          // localsplus index of a fast local
  kLocalPair,      // 3.13 LOAD_FAST_LOAD_FAST and kin: first local << 4 | second local
  kCell,           // localsplus index of a cell or free variable
  kJump,           // jump distance or target (see JumpKind)
  kCompare,        // CompareOp (3.12: << 4; 3.13: << 5 | 16 when the result is made a bool)
  kBinaryOp,       // BinaryOp
  kIntrinsic1,     // Intrinsic1
  kIntrinsic2,     // Intrinsic2
  kFormatValue,    // FORMAT_VALUE: conversion | 4 when a format spec is on the stack
  kConvertValue,   // 3.13 CONVERT_VALUE: the conversion (1 str, 2 repr, 3 ascii)
  // MAKE_FUNCTION (3.11, 3.12) and SET_FUNCTION_ATTRIBUTE (3.13, one bit): defaults 1,
  // kwdefaults 2, annotations 4, closure 8
  kMakeFunctionFlags,
};

// What one opcode byte means in one Python version.
struct OpcodeInfo {
  bool valid = false;     // the version assigns this byte
  std::string_view name;  // CPython's name for the byte ("LOAD_ATTR_SLOT")
  Opcode base{};          // the instruction it executes
  uint8_t cache_entries = 0;
  JumpKind jump = JumpKind::kNone;
  ArgKind arg = ArgKind::kNone;
  bool has_arg() const { return arg != ArgKind::kNone; }
};

// One Python version's opcode bytes.
class OpcodeTable {
 public:
  OpcodeTable(PythonVersion version, const std::array<OpcodeInfo, 256>& by_byte);

  PythonVersion version() const { return version_; }
  const OpcodeInfo& operator[](uint8_t byte) const { return by_byte_[byte]; }
  // The byte this version uses for a base opcode; nullopt where the version lacks it.
  std::optional<uint8_t> byte_of(Opcode op) const;

 private:
  PythonVersion version_;
  std::array<OpcodeInfo, 256> by_byte_;
  std::array<int16_t, kOpcodeCount> byte_of_base_;
};

// Whether dynvm's frontend reads this Python version's bytecode (3.11, 3.12 and 3.13).
// The VM executes fewer: see is_executable_version (decode.h).
bool is_supported_version(PythonVersion version);

// The table of a supported version; for any other version, a table without valid bytes.
const OpcodeTable& opcode_table(PythonVersion version);

// CPython's name of a base opcode ("LOAD_ATTR").
std::string_view opcode_name(Opcode op);
// The operator as dis prints it ("+=", "<=").
std::string_view binary_op_symbol(BinaryOp op);
std::string_view compare_op_symbol(CompareOp op);
// CPython's name of an intrinsic ("INTRINSIC_PRINT").
std::string_view intrinsic1_name(Intrinsic1 op);
std::string_view intrinsic2_name(Intrinsic2 op);

}  // namespace dynvm::frontend
