// The process-wide ORC JIT for the host CPU, shared by the kernel compiler (cpu_jit.cpp) and
// the host-glue compiler (glue_jit.cpp). Private to codegen; only built with LLVM.
#pragma once

#ifdef DYNVM_HAVE_LLVM

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/support/expected.h"

namespace llvm {
class Error;
class Module;
class TargetMachine;
namespace orc {
class LLJIT;
}  // namespace orc
}  // namespace llvm

namespace dynvm::codegen {

// Never destroyed: compiled code may be called until the process exits.
struct HostJit {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> target_machine;
  // The same CPU with the quickest code generation (fast instruction selection and register
  // allocation), for host glue: long straight-line functions that run once per call.
  std::unique_ptr<llvm::TargetMachine> quick_target_machine;
  std::string cpu;
  std::string features;  // sorted, "+avx2,+avx512f,-sse4a,…"
  int lanes = 1;
  std::string error;                                // set when the JIT could not be created
  std::mutex mutex;                                 // held while compiling or loading
  std::map<std::string, CpuKernelFunction> loaded;  // kernel cache key -> function
  int64_t next_library = 0;
};

// The JIT, created on first use (check `error`).
HostJit& host_jit();

std::string llvm_error(llvm::Error error);

// "" when `module` is valid LLVM IR, else what the verifier says.
std::string verify_module(const llvm::Module& module);

// The module as LLVM IR text.
std::string module_text(const llvm::Module& module);

// Runs LLVM's default module pipeline at -O`level` (1 to 3) for the host's target machine.
void optimize_module(llvm::Module& module, llvm::TargetMachine& target_machine, int level);

// The module as an object file for the host.
Expected<std::string> emit_object(llvm::Module& module, llvm::TargetMachine& target_machine);

// Loads `bytes` (an object file) into a JITDylib of its own that resolves against the
// process, and returns the address of `symbol`. `host.mutex` held.
struct LoadedSymbol {  // a struct: Expected of a bare pointer trips -Wshadow
  const void* address = nullptr;
};
Expected<LoadedSymbol> load_object(HostJit& host, const std::string& bytes,
                                   const std::string& symbol);

}  // namespace dynvm::codegen

#endif  // DYNVM_HAVE_LLVM
