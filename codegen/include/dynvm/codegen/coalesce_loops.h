// Pass: merges nested loops whose every index sees them as one contiguous range.
#pragma once

#include "dynvm/codegen/loop_ir.h"

namespace dynvm::codegen {

// `for a in 0..A { for b in 0..B { S } }` becomes `for c in 0..A*B { S' }` when a and b
// appear only in affine indices and every index has coefficient(a) = B * coefficient(b);
// the same for adjacent variables of a reduce. The outer loop's `parallel` carries over.
// Instructions before the inner loop that depend on neither variable (constants the
// lowering placed per outer iteration) move before the merged loop. Merging the parallel
// loop with the row loops inside it makes a batch-by-sequence nest one loop whose extent
// the kernel takes at run time, so a new sequence length reuses the compiled kernel.
void coalesce_loops(LoopKernel& kernel);

}  // namespace dynvm::codegen
