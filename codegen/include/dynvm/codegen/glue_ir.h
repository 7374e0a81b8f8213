// The glue IR: the host side of a compiled variant (checking its guards, picking out its
// arguments) as straight-line code over 64-bit words, for the CPU JIT (glue_jit.h). It knows
// no Python: the runtime lowers guards into loads at offsets, compares with constants and calls
// of helpers it names by address; this layer only compiles them.
//
// A program runs its instructions in order. Every check either holds and execution goes on,
// or the function returns the check's failure code at once. A program that reaches its end
// returns kGluePassed. Text form (docs/glue_ir.md):
//
//   glue check_f params 8 slots 2
//   helper tensor_matches 2
//     %0 = param 1
//     %1 = param 2
//     %2 = const 0
//     check_ult %2, %1 else 0
//     %3 = load %0, 0
//     check_nonzero %3 else 0
//     store 0, %3
//     %4 = load %3, 8
//     %5 = const 0x7f3a10203040
//     check_eq %4, %5 else 0
//     %6 = call tensor_matches(%5, %3)
//     check_nonzero %6 else 1
//   end
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dynvm::codegen {

// A pointer as a glue word, and a word as a pointer: what helpers take and return.
template <typename T>
int64_t glue_word(T* pointer) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(pointer));
}
template <typename T>
T* glue_pointer(int64_t word) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(word));
}

// What a glue function returns when every check held.
constexpr int64_t kGluePassed = -1;

// The compiled form: `params` holds the program's param_count words (read only); `slots` its
// slot_count words, which `store` writes (the caller reads them afterwards, for example to
// release references the helpers returned or to pick up the unpacked arguments).
using GlueFunction = int64_t (*)(const int64_t* params, int64_t* slots);

// A function the program calls: `arity` word arguments, one word result (a C function
// `int64_t name(int64_t, ...)` or one whose arguments and result are pointers or integers
// of 64 bits). A helper called only for its effect may return void; the value its call
// defines is then meaningless and must not be used.
struct GlueHelper {
  std::string name;  // an identifier, unique in the program
  int arity = 0;
  const void* address = nullptr;  // not printed; a parsed program has nullptr
};

enum class GlueOp : uint8_t {
  Param,         // %r = param I             params[I]
  Const,         // %r = const W             the word W (printed in hex when over 0xffff)
  Load,          // %r = load %a, OFF        the word at address %a + OFF (OFF >= 0)
  Load32,        // %r = load32 %a, OFF      the 32-bit word there, zero-extended
  And,           // %r = and %a, %b
  Call,          // %r = call NAME(%a, ...)  a helper
  Store,         //      store S, %a         slots[S] = %a
  CheckEq,       //      check_eq %a, %b else F
  CheckNe,       //      check_ne %a, %b else F
  CheckNonZero,  //      check_nonzero %a else F
  CheckUlt,      //      check_ult %a, %b else F      unsigned %a < %b
  SlotAddr,      // %r = slot_addr S         the address of slots[S] (an array a helper fills)
};

struct GlueInstr {
  GlueOp op = GlueOp::Const;
  std::vector<int> operands;  // value numbers, in the order the text shows them
  // Param: the parameter's index. Const: the word. Load/Load32: the byte offset. Store and
  // SlotAddr: the slot. Unused otherwise.
  int64_t immediate = 0;
  int helper = -1;        // Call: index into GlueProgram::helpers
  int64_t fail_code = 0;  // Check*: what the function returns when the check fails (>= 0)

  // Whether the instruction defines a value (%r = ...). Values are numbered densely in the
  // order of their definitions: the k-th defining instruction defines %k.
  bool defines_value() const {
    return op == GlueOp::Param || op == GlueOp::Const || op == GlueOp::Load ||
           op == GlueOp::Load32 || op == GlueOp::And || op == GlueOp::Call ||
           op == GlueOp::SlotAddr;
  }
};

struct GlueProgram {
  std::string name;  // an identifier: the function's name in the JIT and in the text
  int param_count = 0;
  int slot_count = 0;
  std::vector<GlueHelper> helpers;
  std::vector<GlueInstr> body;

  // Building: each returns the number of the value it defines.
  int param(int64_t index);
  int constant(int64_t word);
  int constant_address(const void* address) {
    return constant(static_cast<int64_t>(reinterpret_cast<intptr_t>(address)));
  }
  int load(int address, int64_t offset);
  int load32(int address, int64_t offset);
  int bit_and(int a, int b);
  // `helper` must have been added with add_helper; operands as many as its arity.
  int call(int helper, std::vector<int> arguments);
  int slot_address(int64_t slot);
  void store(int64_t slot, int value);
  void check_eq(int a, int b, int64_t fail_code);
  void check_ne(int a, int b, int64_t fail_code);
  void check_nonzero(int a, int64_t fail_code);
  void check_ult(int a, int b, int64_t fail_code);
  // The index of the helper named `name` with this arity and address, adding it when new; a
  // different helper under a name already taken is added as name_2, name_3, ...
  int add_helper(const std::string& name, int arity, const void* address);

  int value_count() const { return next_value_; }

 private:
  int define(GlueInstr instr);
  int next_value_ = 0;
};

// The text form above; the helpers' addresses are left out, constants are printed as words.
std::string to_text(const GlueProgram& program);

}  // namespace dynvm::codegen
