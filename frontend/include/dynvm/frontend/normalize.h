// normalize: fills each instruction's NormalizedOp, one meaning across Python versions.
#pragma once

#include "dynvm/frontend/code_info.h"
#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// Maps every decoded instruction to its normalised op (docs/instruction_model.md).
// decode() runs it; it fails only on bytecode CPython's compiler never emits (a 3.12
// FOR_ITER whose target is not END_FOR, say), naming the offset.
Expected<CodeInfo> normalize(CodeInfo code);

}  // namespace dynvm::frontend
