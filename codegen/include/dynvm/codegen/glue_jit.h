// Compiling glue programs (glue_ir.h) to native functions through the host CPU's ORC JIT.
#pragma once

#include <string>

#include "dynvm/codegen/glue_ir.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

struct CompiledGlue {
  GlueFunction function = nullptr;
  double milliseconds = 0;  // wall time of the compilation
  std::string llvm_ir;      // the IR, when asked for
};

// False when dynvm was built without LLVM or the JIT could not start; compile_glue then
// returns an Error.
bool glue_jit_available();

// Verifies, lowers (lower_glue_to_llvm), generates code with LLVM's quickest settings (no IR
// pipeline, fast instruction selection and register allocation) and loads the program. Glue embeds
// process addresses, so it is never cached on disk; the code stays loaded for the life of the
// process. With DYNVM_LOGS containing `glue`, prints the glue IR and its LLVM IR to
// stderr. An invalid program is an internal Error listing the verifier's messages.
Expected<CompiledGlue> compile_glue(const GlueProgram& program, bool keep_llvm_ir = false);

// The LLVM IR of `program` (what is compiled), with helpers as external functions named
// after them (golden tests; independent of the process and host).
Expected<std::string> glue_llvm_ir(const GlueProgram& program);

// Glue functions compiled in this process.
int64_t glue_compilation_count();

}  // namespace dynvm::codegen
