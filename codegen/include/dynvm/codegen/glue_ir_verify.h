// The glue IR verifier: what a program must satisfy before the CPU JIT compiles it.
#pragma once

#include <string>
#include <vector>

#include "dynvm/codegen/glue_ir.h"

namespace dynvm::codegen {

// One message per problem, empty when the program is well formed: the program's and the
// helpers' names are identifiers, helper names unique, arities and the param and slot counts
// not negative; every instruction has as many operands as its op takes (a call as many as its
// helper's arity), each a value defined by an earlier instruction; param indices, store slots
// and helper indices in range; load offsets and failure codes not negative; and value_count()
// agrees with the definitions in the body (which code that edits `body` directly can break).
std::vector<std::string> verify_glue_program(const GlueProgram& program);

}  // namespace dynvm::codegen
