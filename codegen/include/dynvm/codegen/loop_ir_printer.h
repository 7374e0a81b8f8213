// Printing a loop IR kernel as text (docs/loop_ir.md); parse_loop_kernel reads it back.
#pragma once

#include <string>

#include "dynvm/codegen/loop_ir.h"

namespace dynvm::codegen {

// Values print renumbered in definition order (%0, %1, …; loop variables %i0, %i1, …),
// so the text of a kernel does not depend on how its ids were assigned.
std::string to_text(const LoopKernel& kernel);

}  // namespace dynvm::codegen
