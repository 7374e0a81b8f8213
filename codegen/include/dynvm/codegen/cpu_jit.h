// Compiling a loop IR kernel to native code through LLVM's ORC JIT, with the disk cache.
#pragma once

#include <cstdint>
#include <string>

#include "dynvm/codegen/loop_ir.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

// Runs iterations [begin, end) of the kernel's parallel loop; buffers[i] points at the
// first element of the i-th declared buffer. `dims` is reserved for symbolic sizes (pass
// nullptr). Distinct [begin, end) ranges may run concurrently.
using CpuKernelFunction = void (*)(void** buffers, const int64_t* dims, int64_t begin, int64_t end);

struct CpuCompileOptions {
  bool use_disk_cache = true;
  std::string cache_dir;         // empty: default_kernel_cache_dir()
  bool use_memory_cache = true;  // reuse a kernel this process already loaded
  bool keep_llvm_ir = false;     // fill CpuCompiledKernel::llvm_ir (optimized IR)
  int vector_lanes = 0;          // 0: from the host (16 with AVX-512, 8 with AVX2); 1: scalar
};

struct CpuCompiledKernel {
  CpuKernelFunction function = nullptr;
  std::string cache_key;     // content hash of loop IR text + target + versions
  bool compiled = false;     // LLVM optimized and generated code in this call
  bool from_disk = false;    // the object came from the disk cache
  bool from_memory = false;  // this process had loaded it already
  double milliseconds = 0;   // wall time of this call
  std::string llvm_ir;       // when CpuCompileOptions::keep_llvm_ir and compiled
};

// False when dynvm was built without LLVM; compile_cpu_kernel then returns an Error.
bool cpu_jit_available();

// Why the host JIT of a build with LLVM failed to start (LLVM's own message); "" when it
// started, and in a build without LLVM (targets() says that one).
std::string cpu_jit_unavailable_reason();

// "znver4 +avx2,+avx512f,…": the CPU and features kernels are compiled for.
std::string cpu_jit_target();

// Lowers to LLVM IR, optimizes (-O3 pipeline for the host CPU), emits an object file,
// stores it in the disk cache and loads it into the process-wide JIT; or loads a cached
// object without compiling. With DYNVM_LOGS containing `kernels`, prints the loop IR and
// the optimized LLVM IR of every kernel it compiles to stderr.
Expected<CpuCompiledKernel> compile_cpu_kernel(const LoopKernel& kernel,
                                               const CpuCompileOptions& options = {});

// The LLVM IR `kernel` lowers to before optimisation, with `lanes` vector lanes and the
// function named `dynvm_kernel` (golden tests, debugging). Independent of the host CPU.
Expected<std::string> cpu_kernel_llvm_ir(const LoopKernel& kernel, int lanes);

// How many kernels LLVM has compiled in this process (cache hits excluded).
int64_t cpu_jit_compilation_count();
// How many kernels this process loaded from the disk cache instead (the run report).
int64_t cpu_jit_disk_load_count();

}  // namespace dynvm::codegen
