// Printing a loop IR kernel as text (docs/loop_ir.md); parse_loop_kernel reads it back.
#pragma once

#include <string>

#include "dynvm/codegen/loop_ir.h"

namespace dynvm::codegen {

// Values print renumbered in definition order (%0, %1, …; loop variables %i0, %i1, …),
// so the text of a kernel does not depend on how its ids were assigned.
std::string to_text(const LoopKernel& kernel);

// The text of what a target's generated code depends on: to_text with the parallel loop's
// extent and the lengths of the input and output buffers written as `?`. The CPU's native
// function takes the range of the parallel loop it runs as arguments and never reads the
// lengths, so one compiled function serves every kernel with this text: the same group at
// another batch size or sequence length, when those are the parallel loop's (the key of
// the CPU's kernel caches, docs/loop_ir.md).
std::string code_text(const LoopKernel& kernel);

}  // namespace dynvm::codegen
