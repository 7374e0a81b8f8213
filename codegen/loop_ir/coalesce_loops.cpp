// Loop coalescing: turns nests over contiguous ranges into one long loop, so the innermost
// loop (the one the CPU target vectorizes) is as long as the layout allows.
#include "dynvm/codegen/coalesce_loops.h"

#include <algorithm>
#include <utility>

namespace dynvm::codegen {

namespace {

// True when, everywhere in `block`, `outer` and `inner` appear only in affine indices and
// with coefficient(outer) == inner_extent * coefficient(inner).
bool can_merge(const LoopBlock& block, ValueId outer, ValueId inner, int64_t inner_extent) {
  for (const auto& stmt : block) {
    for (ValueId v : stmt->operands) {
      if (v == outer || v == inner) return false;
    }
    if (stmt->kind == LoopStmtKind::Reduce && (stmt->yield == outer || stmt->yield == inner)) {
      return false;
    }
    if ((stmt->kind == LoopStmtKind::Instr && stmt->op == LoopOp::Load) ||
        stmt->kind == LoopStmtKind::Store) {
      if (stmt->index.coefficient_of(outer) != inner_extent * stmt->index.coefficient_of(inner)) {
        return false;
      }
    }
    if (!can_merge(stmt->body, outer, inner, inner_extent)) return false;
  }
  return true;
}

// Drops the terms of `outer` (their contribution is now carried by `inner`).
void drop_variable(LoopBlock& block, ValueId outer) {
  for (auto& stmt : block) {
    auto& terms = stmt->index.terms;
    terms.erase(std::remove_if(terms.begin(), terms.end(),
                               [&](const AffineIndex::Term& t) { return t.value == outer; }),
                terms.end());
    drop_variable(stmt->body, outer);
  }
}

void coalesce_block(LoopBlock& block) {
  for (auto& stmt : block) {
    if (stmt->kind == LoopStmtKind::For) {
      while (stmt->body.size() == 1 && stmt->body[0]->kind == LoopStmtKind::For) {
        LoopStmt& inner = *stmt->body[0];
        ValueId a = stmt->vars[0];
        ValueId b = inner.vars[0];
        if (!can_merge(inner.body, a, b, inner.extents[0])) break;
        drop_variable(inner.body, a);
        int64_t extent = stmt->extents[0] * inner.extents[0];
        LoopBlock body = std::move(inner.body);
        stmt->vars = {b};
        stmt->extents = {extent};
        stmt->body = std::move(body);
      }
    } else if (stmt->kind == LoopStmtKind::Reduce) {
      for (size_t k = stmt->vars.size(); k-- > 1;) {
        ValueId a = stmt->vars[k - 1];
        ValueId b = stmt->vars[k];
        if (!can_merge(stmt->body, a, b, stmt->extents[k]) || stmt->yield == a) continue;
        drop_variable(stmt->body, a);
        stmt->extents[k] *= stmt->extents[k - 1];
        stmt->vars.erase(stmt->vars.begin() + static_cast<std::ptrdiff_t>(k - 1));
        stmt->extents.erase(stmt->extents.begin() + static_cast<std::ptrdiff_t>(k - 1));
      }
    }
    coalesce_block(stmt->body);
  }
}

}  // namespace

void coalesce_loops(LoopKernel& kernel) { coalesce_block(kernel.body); }

}  // namespace dynvm::codegen
