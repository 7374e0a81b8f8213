// Reading the glue IR's text form (docs/glue_ir.md) back into a GlueProgram.
#pragma once

#include <string_view>

#include "dynvm/codegen/glue_ir.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

// Parses one program. Malformed text is an Error naming the place ("3:17: ...") and what was
// expected; so are uses of undefined values, values defined twice, calls of undeclared helpers
// and calls with the wrong number of arguments. Value names are free identifiers in the input
// and are renumbered in definition order; helpers have no address. Ranges (param indices,
// slots, offsets, failure codes) are the verifier's to check, not the parser's.
Expected<GlueProgram> parse_glue_program(std::string_view text);

}  // namespace dynvm::codegen
