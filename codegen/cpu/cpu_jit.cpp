// The CPU target's JIT: one process-wide LLJIT for the host CPU; each kernel is compiled
// to an object file (or taken from the disk cache) and loaded into its own JITDylib.
#include "dynvm/codegen/cpu_jit.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/codegen/kernel_disk_cache.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_ir_verify.h"
#include "dynvm/support/log_topics.h"

#ifdef DYNVM_HAVE_LLVM
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "cpu/host_jit.h"
#include "cpu/lower_loops_to_llvm.h"
#endif

#ifndef DYNVM_CODEGEN_VERSION
#define DYNVM_CODEGEN_VERSION "unknown"
#endif

namespace dynvm::codegen {

namespace {

// Bumped whenever the LLVM lowering changes what a given loop IR compiles to.
constexpr const char* kEmitterRevision = "cpu-emitter-7";

int64_t g_compilations = 0;  // guarded by the JIT's mutex
int64_t g_disk_loads = 0;    // likewise

}  // namespace

bool cpu_jit_available() {
#ifdef DYNVM_HAVE_LLVM
  return host_jit().error.empty();
#else
  return false;
#endif
}

std::string cpu_jit_unavailable_reason() {
#ifdef DYNVM_HAVE_LLVM
  return host_jit().error;
#else
  return "";
#endif
}

std::string cpu_jit_target() {
#ifdef DYNVM_HAVE_LLVM
  return host_jit().cpu + " " + host_jit().features;
#else
  return "";
#endif
}

Expected<std::string> cpu_kernel_llvm_ir(const LoopKernel& kernel, int lanes) {
#ifndef DYNVM_HAVE_LLVM
  (void)kernel;
  (void)lanes;
  return make_error("the CPU backend is unavailable: dynvm was built without LLVM");
#else
  std::vector<std::string> problems = verify_loop_kernel(kernel);
  if (!problems.empty()) return make_error("invalid loop IR: " + problems.front());
  if (lanes < 1 || lanes > 64 || (lanes & (lanes - 1)) != 0) {
    return make_error("lanes must be a power of two up to 64");
  }
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      lower_loops_to_llvm(kernel, context, "dynvm_kernel", lanes);
  std::string ir;
  llvm::raw_string_ostream stream(ir);
  module->print(stream, nullptr);
  stream.flush();
  return ir;
#endif
}

int64_t cpu_jit_compilation_count() {
#ifdef DYNVM_HAVE_LLVM
  std::lock_guard<std::mutex> lock(host_jit().mutex);
#endif
  return g_compilations;
}

int64_t cpu_jit_disk_load_count() {
#ifdef DYNVM_HAVE_LLVM
  std::lock_guard<std::mutex> lock(host_jit().mutex);
#endif
  return g_disk_loads;
}

Expected<CpuCompiledKernel> compile_cpu_kernel(const LoopKernel& kernel,
                                               const CpuCompileOptions& options) {
#ifndef DYNVM_HAVE_LLVM
  (void)kernel;
  (void)options;
  return make_error("the CPU backend is unavailable: dynvm was built without LLVM");
#else
  auto start = std::chrono::steady_clock::now();
  HostJit& host = host_jit();
  if (!host.error.empty()) return make_error("the CPU backend is unavailable: " + host.error);
  std::vector<std::string> problems = verify_loop_kernel(kernel);
  if (!problems.empty()) {
    std::string message = "internal error: invalid loop IR for kernel " + kernel.name + ":";
    for (const std::string& p : problems) message += "\n  " + p;
    return make_error(message);
  }
  int lanes = options.vector_lanes > 0 ? options.vector_lanes : host.lanes;
  if (lanes > 64 || (lanes & (lanes - 1)) != 0) {
    return make_error("vector_lanes must be a power of two up to 64, not " + std::to_string(lanes));
  }
  // Keyed without the sizes the function takes at run time: one compiled function serves
  // the kernel at every extent of its parallel loop (dynamic batch sizes and lengths).
  std::string key =
      content_hash(code_text(kernel) + "\n" + host.cpu + " " + host.features + "\nlanes " +
                   std::to_string(lanes) + "\ndynvm " DYNVM_CODEGEN_VERSION + " " +
                   kEmitterRevision + "\nLLVM " LLVM_VERSION_STRING);
  std::string symbol = "dynvm_kernel_" + key;
  std::string dir = options.cache_dir.empty() ? default_kernel_cache_dir() : options.cache_dir;
  CpuCompiledKernel result;
  result.cache_key = key;
  auto finish = [&](CpuKernelFunction function) {
    result.function = function;
    result.milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
  };

  std::lock_guard<std::mutex> lock(host.mutex);
  if (options.use_memory_cache) {
    if (auto it = host.loaded.find(key); it != host.loaded.end()) {
      result.from_memory = true;
      return finish(it->second);
    }
  }
  if (options.use_disk_cache) {
    if (std::optional<std::string> bytes = load_cached_object(dir, key)) {
      Expected<LoadedSymbol> loaded = load_object(host, *bytes, symbol);
      if (loaded) {
        auto function = reinterpret_cast<CpuKernelFunction>(const_cast<void*>(loaded->address));
        result.from_disk = true;
        ++g_disk_loads;
        host.loaded[key] = function;
        return finish(function);
      }
      // A corrupt or foreign object: compile afresh and overwrite it.
    }
  }

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = lower_loops_to_llvm(kernel, context, symbol, lanes);
  module->setDataLayout(host.target_machine->createDataLayout());
  module->setTargetTriple(host.target_machine->getTargetTriple().str());
  if (std::string problem = verify_module(*module); !problem.empty()) {
    return make_error("internal error: invalid LLVM IR for kernel " + kernel.name + ": " + problem);
  }
  optimize_module(*module, *host.target_machine, 3);
  if (options.keep_llvm_ir || log_topic_enabled("kernels")) {
    std::string ir = module_text(*module);
    if (log_topic_enabled("kernels")) {
      std::cerr << "[dynvm kernels] " << kernel.name << " (" << key << ") loop IR:\n"
                << to_text(kernel) << "[dynvm kernels] " << kernel.name << " LLVM IR (optimized):\n"
                << ir;
    }
    if (options.keep_llvm_ir) result.llvm_ir = std::move(ir);
  }
  Expected<std::string> object = emit_object(*module, *host.target_machine);
  if (!object) return object.error();
  ++g_compilations;
  result.compiled = true;
  if (options.use_disk_cache) store_cached_object(dir, key, *object);
  Expected<LoadedSymbol> loaded = load_object(host, *object, symbol);
  if (!loaded) return loaded.error();
  auto function = reinterpret_cast<CpuKernelFunction>(const_cast<void*>(loaded->address));
  host.loaded[key] = function;
  return finish(function);
#endif
}

}  // namespace dynvm::codegen
