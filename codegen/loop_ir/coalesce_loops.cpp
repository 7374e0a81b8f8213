// Loop coalescing: turns nests over contiguous ranges into one long loop, so the innermost
// loop (the one the CPU target vectorizes) is as long as the layout allows.
#include "dynvm/codegen/coalesce_loops.h"

#include <algorithm>
#include <iterator>
#include <set>
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

// True when the statements of `body` before its last (a loop) are instructions that do not
// depend on `var`, the loop variable of the loop `body` belongs to: the invariant values a
// lowering computes once per iteration of an outer loop (constants), which may move out.
bool only_invariants_before_inner_loop(const LoopBlock& body, ValueId var) {
  if (body.empty() || body.back()->kind != LoopStmtKind::For) return false;
  std::set<ValueId> dependent{var};
  for (size_t i = 0; i + 1 < body.size(); ++i) {
    const LoopStmt& stmt = *body[i];
    if (stmt.kind != LoopStmtKind::Instr) return false;
    if (stmt.op == LoopOp::Load) {
      for (const AffineIndex::Term& t : stmt.index.terms) {
        if (dependent.count(t.value)) return false;
      }
    }
    for (ValueId v : stmt.operands) {
      if (dependent.count(v)) return false;
    }
  }
  return true;
}

// Merges `outer` with the loop its body ends with while their indices allow it. The
// instructions before the inner loop, invariant in both (only_invariants_before_inner_loop),
// move into `hoisted`, to run before `outer`.
void merge_nested(LoopStmt& outer, LoopBlock& hoisted) {
  while (only_invariants_before_inner_loop(outer.body, outer.vars[0])) {
    LoopStmt& inner = *outer.body.back();
    ValueId a = outer.vars[0];
    ValueId b = inner.vars[0];
    if (!can_merge(inner.body, a, b, inner.extents[0])) break;
    drop_variable(inner.body, a);
    int64_t extent = outer.extents[0] * inner.extents[0];
    LoopBlock body = std::move(inner.body);
    for (size_t i = 0; i + 1 < outer.body.size(); ++i) hoisted.push_back(std::move(outer.body[i]));
    outer.vars = {b};
    outer.extents = {extent};
    outer.body = std::move(body);
  }
}

void coalesce_block(LoopBlock& block) {
  for (size_t i = 0; i < block.size(); ++i) {
    LoopStmt* stmt = block[i].get();
    if (stmt->kind == LoopStmtKind::For) {
      LoopBlock hoisted;
      merge_nested(*stmt, hoisted);
      size_t count = hoisted.size();
      block.insert(block.begin() + static_cast<std::ptrdiff_t>(i),
                   std::make_move_iterator(hoisted.begin()),
                   std::make_move_iterator(hoisted.end()));
      i += count;
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
