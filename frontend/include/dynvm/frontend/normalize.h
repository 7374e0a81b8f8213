// normalize: fills each instruction's NormalizedOp, one meaning across Python versions.
#pragma once

#include "dynvm/frontend/code_info.h"
#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// Whether the VM executes this Python version's bytecode, i.e. whether its instructions
// normalise to the VM's ops: 3.11 and 3.12. The frontend reads more (is_supported_version
// in opcode.h: 3.13 too) for listings.
bool is_executable_version(PythonVersion version);

// Maps every decoded instruction to its normalised op (docs/instruction_model.md).
// decode() runs it; it fails on code of a version the VM does not execute and on bytecode
// CPython's compiler never emits (a 3.12 FOR_ITER whose target is not END_FOR, say),
// naming the offset.
Expected<CodeInfo> normalize(CodeInfo code);

}  // namespace dynvm::frontend
