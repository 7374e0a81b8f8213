// Names of the loop IR's listed kinds, statement factories and small queries.
#include "dynvm/codegen/loop_ir.h"

#include <utility>

namespace dynvm::codegen {

std::string_view loop_op_name(LoopOp op) {
  switch (op) {
#define DYNVM_LOOP_OP_NAME(e, name, arity) \
  case LoopOp::e:                          \
    return name;
    DYNVM_LOOP_OPS(DYNVM_LOOP_OP_NAME)
#undef DYNVM_LOOP_OP_NAME
  }
  return "?";
}

int loop_op_arity(LoopOp op) {
  switch (op) {
#define DYNVM_LOOP_OP_ARITY(e, name, arity) \
  case LoopOp::e:                           \
    return arity;
    DYNVM_LOOP_OPS(DYNVM_LOOP_OP_ARITY)
#undef DYNVM_LOOP_OP_ARITY
  }
  return 0;
}

bool is_comparison(LoopOp op) {
  return op == LoopOp::Eq || op == LoopOp::Ne || op == LoopOp::Lt || op == LoopOp::Le ||
         op == LoopOp::Gt || op == LoopOp::Ge;
}

std::string_view reduce_kind_name(ReduceKind kind) {
  switch (kind) {
#define DYNVM_REDUCE_KIND_NAME(e, name) \
  case ReduceKind::e:                   \
    return name;
    DYNVM_REDUCE_KINDS(DYNVM_REDUCE_KIND_NAME)
#undef DYNVM_REDUCE_KIND_NAME
  }
  return "?";
}

std::string_view buffer_role_name(BufferRole role) {
  switch (role) {
#define DYNVM_BUFFER_ROLE_NAME(e, name) \
  case BufferRole::e:                   \
    return name;
    DYNVM_BUFFER_ROLES(DYNVM_BUFFER_ROLE_NAME)
#undef DYNVM_BUFFER_ROLE_NAME
  }
  return "?";
}

int64_t AffineIndex::coefficient_of(ValueId value) const {
  int64_t sum = 0;
  for (const Term& term : terms) {
    if (term.value == value) sum += term.coefficient;
  }
  return sum;
}

const LoopStmt* LoopKernel::parallel_loop() const {
  for (const auto& stmt : body) {
    if (stmt->kind == LoopStmtKind::For && stmt->parallel) return stmt.get();
  }
  return nullptr;
}

int64_t LoopKernel::parallel_extent() const {
  const LoopStmt* loop = parallel_loop();
  return loop ? loop->extents.at(0) : 1;
}

std::unique_ptr<LoopStmt> make_const(ValueId result, graph::DType type, double value) {
  auto stmt = std::make_unique<LoopStmt>();
  stmt->kind = LoopStmtKind::Instr;
  stmt->op = LoopOp::Const;
  stmt->result = result;
  stmt->type = type;
  if (graph::is_floating(type)) {
    stmt->real = value;
  } else if (type == graph::DType::Bool) {
    stmt->integer = value != 0.0 ? 1 : 0;
  } else {
    stmt->integer = static_cast<int64_t>(value);
  }
  return stmt;
}

std::unique_ptr<LoopStmt> make_instr(ValueId result, graph::DType type, LoopOp op,
                                     std::vector<ValueId> operands) {
  auto stmt = std::make_unique<LoopStmt>();
  stmt->kind = LoopStmtKind::Instr;
  stmt->op = op;
  stmt->result = result;
  stmt->type = type;
  stmt->operands = std::move(operands);
  return stmt;
}

std::unique_ptr<LoopStmt> make_load(ValueId result, graph::DType type, int32_t buffer,
                                    AffineIndex index) {
  auto stmt = std::make_unique<LoopStmt>();
  stmt->kind = LoopStmtKind::Instr;
  stmt->op = LoopOp::Load;
  stmt->result = result;
  stmt->type = type;
  stmt->buffer = buffer;
  stmt->index = std::move(index);
  return stmt;
}

std::unique_ptr<LoopStmt> make_store(int32_t buffer, AffineIndex index, ValueId value) {
  auto stmt = std::make_unique<LoopStmt>();
  stmt->kind = LoopStmtKind::Store;
  stmt->buffer = buffer;
  stmt->index = std::move(index);
  stmt->operands = {value};
  return stmt;
}

bool is_storage_only(graph::DType type) {
  return type == graph::DType::Float16 || type == graph::DType::BFloat16;
}

graph::DType compute_type(graph::DType type) {
  return is_storage_only(type) ? graph::DType::Float32 : type;
}

}  // namespace dynvm::codegen
