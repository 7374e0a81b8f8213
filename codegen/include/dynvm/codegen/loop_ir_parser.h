// Reading the loop IR text format (docs/loop_ir.md) back into a LoopKernel.
#pragma once

#include <string_view>

#include "dynvm/codegen/loop_ir.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

// Parses one kernel. Malformed text is an Error naming the place ("3:17: ...") and what
// was expected. Value names are free in the input; the printer renumbers them.
Expected<LoopKernel> parse_loop_kernel(std::string_view text);

}  // namespace dynvm::codegen
