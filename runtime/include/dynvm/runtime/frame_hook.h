// frame_hook: the PEP 523 frame evaluator that hands frames of user code to dynvm —
// for the duration of a dynvm.compile'd call (that function's frames and what it calls)
// or, under `dynvm run`, for the whole program — and steps aside everywhere else.
#pragma once

#include <string>
#include <vector>

#include "dynvm/runtime/compiled_function.h"

namespace dynvm::runtime {

// Which code `dynvm run` (and the callees of a compiled function) compiles: files outside
// the standard library, site/dist-packages, torch and dynvm itself, adjusted by globs.
struct FrameFilter {
  std::vector<std::string> include;        // fnmatch globs on the file name: compiled anyway
  std::vector<std::string> exclude;        // never compiled
  std::vector<std::string> skip_prefixes;  // directories left to CPython
};

// Installs the hook for every frame of every thread, with these options (dynvm run).
void enable_global_compilation(const CompileOptions& options, FrameFilter filter);
void disable_global_compilation();

// While alive, frames of `code` (borrowed, the compiled function's own code) and of the
// user code it calls are compiled on this thread with `options` (dynvm.compile).
class CompileScope {
 public:
  CompileScope(const CompileOptions& options, PyObject* code);
  ~CompileScope();
  CompileScope(const CompileScope&) = delete;
  CompileScope& operator=(const CompileScope&) = delete;

 private:
  const CompileOptions* saved_options_;
  PyObject* saved_code_;
};

// Sets the directories no frame is compiled in (the standard library, torch, dynvm), and
// those inside them that are compiled all the same (installed packages: the standard
// library's directory often holds site-packages); the longest matching prefix decides. Set
// once by the Python module.
void set_default_skip_prefixes(std::vector<std::string> skips, std::vector<std::string> keeps);

// While alive, this thread's frames run plainly: dynvm is tracing or running a graph.
class HookPause {
 public:
  HookPause();
  ~HookPause();
  HookPause(const HookPause&) = delete;
  HookPause& operator=(const HookPause&) = delete;

 private:
  bool saved_;
};

}  // namespace dynvm::runtime
