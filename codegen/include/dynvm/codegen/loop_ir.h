// The loop IR: one kernel as buffers, loop nests, loads/stores with affine indices and
// scalar SSA instructions (docs/loop_ir.md). Targets lower it; tests read it as text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/graph/dtype.h"

namespace dynvm::codegen {

// Scalar instruction operators, listed once:
// X(enumerator, name in the text, number of operands). Const and Load take no value
// operands (a literal, an address); Cast converts its operand to the result type.
#define DYNVM_LOOP_OPS(X)        \
  X(Const, "const", 0)           \
  X(Load, "load", 0)             \
  X(Cast, "cast", 1)             \
  X(Neg, "neg", 1)               \
  X(Abs, "abs", 1)               \
  X(Reciprocal, "reciprocal", 1) \
  X(Sqrt, "sqrt", 1)             \
  X(Rsqrt, "rsqrt", 1)           \
  X(Exp, "exp", 1)               \
  X(Expm1, "expm1", 1)           \
  X(Log, "log", 1)               \
  X(Log1p, "log1p", 1)           \
  X(Tanh, "tanh", 1)             \
  X(Erf, "erf", 1)               \
  X(Sigmoid, "sigmoid", 1)       \
  X(Sin, "sin", 1)               \
  X(Cos, "cos", 1)               \
  X(Not, "not", 1)               \
  X(Add, "add", 2)               \
  X(Sub, "sub", 2)               \
  X(Mul, "mul", 2)               \
  X(Div, "div", 2)               \
  X(Rem, "rem", 2)               \
  X(Pow, "pow", 2)               \
  X(Max, "max", 2)               \
  X(Min, "min", 2)               \
  X(And, "and", 2)               \
  X(Or, "or", 2)                 \
  X(Eq, "eq", 2)                 \
  X(Ne, "ne", 2)                 \
  X(Lt, "lt", 2)                 \
  X(Le, "le", 2)                 \
  X(Gt, "gt", 2)                 \
  X(Ge, "ge", 2)                 \
  X(Select, "select", 3)

enum class LoopOp : uint8_t {
#define DYNVM_LOOP_OP_ENUM(e, name, arity) e,
  DYNVM_LOOP_OPS(DYNVM_LOOP_OP_ENUM)
#undef DYNVM_LOOP_OP_ENUM
};

std::string_view loop_op_name(LoopOp op);
int loop_op_arity(LoopOp op);
bool is_comparison(LoopOp op);

// X(enumerator, name in the text). max/min propagate NaN, as torch's amax/amin do.
#define DYNVM_REDUCE_KINDS(X) \
  X(Sum, "sum")               \
  X(Max, "max")               \
  X(Min, "min")

enum class ReduceKind : uint8_t {
#define DYNVM_REDUCE_KIND_ENUM(e, name) e,
  DYNVM_REDUCE_KINDS(DYNVM_REDUCE_KIND_ENUM)
#undef DYNVM_REDUCE_KIND_ENUM
};

std::string_view reduce_kind_name(ReduceKind kind);

// X(enumerator, name in the text)
#define DYNVM_BUFFER_ROLES(X) \
  X(Input, "in")              \
  X(Output, "out")            \
  X(Temp, "temp")

enum class BufferRole : uint8_t {
#define DYNVM_BUFFER_ROLE_ENUM(e, name) e,
  DYNVM_BUFFER_ROLES(DYNVM_BUFFER_ROLE_ENUM)
#undef DYNVM_BUFFER_ROLE_ENUM
};

std::string_view buffer_role_name(BufferRole role);

// A kernel argument: buffers[i] of the native function is the i-th buffer declared.
struct LoopBuffer {
  std::string name;  // an identifier, unique in the kernel
  graph::DType dtype = graph::DType::Float32;
  BufferRole role = BufferRole::Input;
  int64_t num_elements = 0;  // elements addressed from the base pointer (bounds, temps)
};

// Scalar SSA values (loop variables, instruction and reduction results) are numbered
// densely per kernel.
using ValueId = int32_t;

// sum(coefficient * value) + offset, in elements; values are i64 (loop variables or
// index arithmetic). A coefficient of 0 never appears: broadcasting drops the term.
struct AffineIndex {
  struct Term {
    ValueId value = -1;
    int64_t coefficient = 0;
    friend bool operator==(const Term& a, const Term& b) {
      return a.value == b.value && a.coefficient == b.coefficient;
    }
  };
  std::vector<Term> terms;
  int64_t offset = 0;

  int64_t coefficient_of(ValueId value) const;
  friend bool operator==(const AffineIndex& a, const AffineIndex& b) {
    return a.terms == b.terms && a.offset == b.offset;
  }
};

#define DYNVM_LOOP_STMT_KINDS(X) \
  X(Instr, "instr")              \
  X(Store, "store")              \
  X(For, "for")                  \
  X(Reduce, "reduce")

enum class LoopStmtKind : uint8_t {
#define DYNVM_LOOP_STMT_ENUM(e, name) e,
  DYNVM_LOOP_STMT_KINDS(DYNVM_LOOP_STMT_ENUM)
#undef DYNVM_LOOP_STMT_ENUM
};

struct LoopStmt;
using LoopBlock = std::vector<std::unique_ptr<LoopStmt>>;

// One statement. Which fields matter depends on the kind:
//  Instr   `%r: type = op operands` (Const: the literal; Load: buffer + index)
//  Store   `store buffer[index] = operands[0]` (the value is converted to the buffer's dtype)
//  For     `for %v in 0..extent { body }` — one variable per loop; the kernel's outermost
//          statement is a `parallel for` whose range the caller splits across threads
//  Reduce  `%r: type = reduce kind init for %v in 0..e, ... { body yield %y }` — nested
//          loops over `vars` (outermost first) folding `yield` into an accumulator of `type`
struct LoopStmt {
  LoopStmtKind kind = LoopStmtKind::Instr;
  ValueId result = -1;
  graph::DType type = graph::DType::Float32;
  LoopOp op = LoopOp::Const;
  std::vector<ValueId> operands;
  // Const: the literal (floating types use `real`, integer and bool types `integer`).
  double real = 0.0;
  int64_t integer = 0;
  // Load and Store.
  int32_t buffer = -1;
  AffineIndex index;
  // For and Reduce.
  std::vector<ValueId> vars;
  std::vector<int64_t> extents;
  bool parallel = false;
  LoopBlock body;
  // Reduce.
  ReduceKind reduce = ReduceKind::Sum;
  ValueId yield = -1;
};

// One kernel: its buffers (arguments) and its statements.
struct LoopKernel {
  std::string name;
  std::vector<LoopBuffer> buffers;
  LoopBlock body;
  int32_t num_values = 0;  // ValueIds in use are 0 .. num_values-1

  ValueId new_value() { return num_values++; }
  // The outermost parallel loop (the range the caller splits), or nullptr.
  const LoopStmt* parallel_loop() const;
  int64_t parallel_extent() const;
};

// Factories for statements; they do not number values (the caller passes ids).
std::unique_ptr<LoopStmt> make_const(ValueId result, graph::DType type, double value);
std::unique_ptr<LoopStmt> make_instr(ValueId result, graph::DType type, LoopOp op,
                                     std::vector<ValueId> operands);
std::unique_ptr<LoopStmt> make_load(ValueId result, graph::DType type, int32_t buffer,
                                    AffineIndex index);
std::unique_ptr<LoopStmt> make_store(int32_t buffer, AffineIndex index, ValueId value);

// True for types whose arithmetic happens in another type (f16, bf16 compute in f32).
bool is_storage_only(graph::DType type);
// The type arithmetic on `type` happens in.
graph::DType compute_type(graph::DType type);

}  // namespace dynvm::codegen
