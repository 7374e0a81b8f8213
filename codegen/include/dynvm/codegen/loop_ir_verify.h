// The loop IR verifier: what a kernel must satisfy before a target lowers it.
#pragma once

#include <string>
#include <vector>

#include "dynvm/codegen/loop_ir.h"

namespace dynvm::codegen {

// One message per problem, empty when the kernel is well formed: values defined once
// and before their uses in an enclosing scope; operand counts and types as each operator
// wants them (operands of the result type; compares give bool; select takes a bool; casts
// take anything; transcendental functions, sqrt, reciprocal and pow take floats; not, and,
// or take bool or integers; indices are i64); buffer references in range; one variable per `for`,
// extents not negative; `parallel` only on a top-level loop, at most once; a reduce
// yields a value of its body of the reduce's type.
std::vector<std::string> verify_loop_kernel(const LoopKernel& kernel);

}  // namespace dynvm::codegen
