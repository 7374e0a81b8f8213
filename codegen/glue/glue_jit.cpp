// The glue compiler: verify, lower, generate code quickly, load into the host JIT under a
// fresh name.
#include "dynvm/codegen/glue_jit.h"

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>

#include "dynvm/codegen/glue_ir_verify.h"
#include "dynvm/support/log_topics.h"

#ifdef DYNVM_HAVE_LLVM
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "cpu/host_jit.h"
#include "glue/lower_glue_to_llvm.h"
#endif

namespace dynvm::codegen {

namespace {

std::atomic<int64_t> g_glue_compilations{0};

Expected<bool> check_program(const GlueProgram& program) {
  std::vector<std::string> problems = verify_glue_program(program);
  if (problems.empty()) return true;
  std::string message = "internal error: invalid glue program " + program.name + ":";
  for (const std::string& p : problems) message += "\n  " + p;
  return make_error(message);
}

}  // namespace

bool glue_jit_available() {
#ifdef DYNVM_HAVE_LLVM
  return host_jit().error.empty();
#else
  return false;
#endif
}

int64_t glue_compilation_count() { return g_glue_compilations.load(); }

Expected<std::string> glue_llvm_ir(const GlueProgram& program) {
  Expected<bool> valid = check_program(program);
  if (!valid) return valid.error();
#ifndef DYNVM_HAVE_LLVM
  return make_error("the CPU backend is unavailable: dynvm was built without LLVM");
#else
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      lower_glue_to_llvm(program, context, program.name, /*symbolic_helpers=*/true);
  return module_text(*module);
#endif
}

Expected<CompiledGlue> compile_glue(const GlueProgram& program, bool keep_llvm_ir) {
  Expected<bool> valid = check_program(program);
  if (!valid) return valid.error();
#ifndef DYNVM_HAVE_LLVM
  (void)keep_llvm_ir;
  return make_error("the CPU backend is unavailable: dynvm was built without LLVM");
#else
  auto start = std::chrono::steady_clock::now();
  HostJit& host = host_jit();
  if (!host.error.empty()) return make_error("the CPU backend is unavailable: " + host.error);
  std::lock_guard<std::mutex> lock(host.mutex);
  // A name of its own: glue embeds this process's addresses, so programs never share code.
  std::string symbol = "dynvm_glue_" + std::to_string(host.next_library) + "_" + program.name;
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = lower_glue_to_llvm(program, context, symbol);
  module->setDataLayout(host.target_machine->createDataLayout());
  module->setTargetTriple(host.target_machine->getTargetTriple().str());
  if (std::string problem = verify_module(*module); !problem.empty()) {
    return make_error("internal error: invalid LLVM IR for glue " + program.name + ": " + problem);
  }
  // No IR pipeline and the quickest code generation: the work is in the helpers the glue
  // calls, and -O2 with full code generation made ResNet-18's 409 guards take 110 ms to
  // compile for a 0.5 µs better check (bench/guard_bench.py).
  CompiledGlue result;
  bool logs = log_topic_enabled("glue");
  if (keep_llvm_ir || logs) {
    std::string ir = module_text(*module);
    if (logs) {
      std::cerr << "[dynvm glue] " << program.name << ":\n"
                << to_text(program) << "[dynvm glue] " << program.name << " LLVM IR:\n"
                << ir;
    }
    if (keep_llvm_ir) result.llvm_ir = std::move(ir);
  }
  Expected<std::string> object = emit_object(*module, *host.quick_target_machine);
  if (!object) return object.error();
  Expected<LoadedSymbol> loaded = load_object(host, *object, symbol);
  if (!loaded) return loaded.error();
  ++g_glue_compilations;
  result.function = reinterpret_cast<GlueFunction>(const_cast<void*>(loaded->address));
  result.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
#endif
}

}  // namespace dynvm::codegen
