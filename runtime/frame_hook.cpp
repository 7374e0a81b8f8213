// frame_hook: the PEP 523 evaluator and the decisions of which frames dynvm takes.
#include "dynvm/runtime/frame_hook.h"

#include <fnmatch.h>

#include <string>
#include <utility>

#include "dynvm/runtime/frame_access.h"
#include "dynvm/runtime/frame_driver.h"
#include "dynvm/vm/code_extra.h"

namespace dynvm::runtime {

namespace {

// dynvm.compile: the options of the innermost compiled call on this thread, and that
// function's own code (compiled wherever it lives).
thread_local const CompileOptions* t_options = nullptr;
thread_local PyObject* t_code = nullptr;
// dynvm is tracing or running a graph on this thread: frames run plainly.
thread_local bool t_paused = false;

// dynvm run: every thread.
bool g_global = false;
CompileOptions g_global_options;
FrameFilter g_filter;
std::vector<std::string> g_default_skips;
std::vector<std::string> g_default_keeps;
bool g_installed = false;

// Per code object, in its co_extra slot: may dynvm compile it, under the filter of a
// compiled function's callees and under dynvm run's, as decided in `generation`.
struct Eligibility {
  uint64_t generation = 0;
  int8_t for_callees = -1;  // -1: not decided yet
  int8_t for_run = -1;
};

uint64_t g_filter_generation = 1;

bool starts_with(const std::string& s, const std::string& prefix) {
  return !prefix.empty() && s.compare(0, prefix.size(), prefix) == 0;
}

// The length of the longest of `prefixes` that `file` starts with (0: none).
size_t longest_prefix(const std::vector<std::string>& prefixes, const std::string& file) {
  size_t longest = 0;
  for (const std::string& prefix : prefixes) {
    if (prefix.size() > longest && starts_with(file, prefix)) longest = prefix.size();
  }
  return longest;
}

bool matches_any(const std::vector<std::string>& globs, const std::string& file) {
  for (const std::string& g : globs) {
    if (fnmatch(g.c_str(), file.c_str(), 0) == 0) return true;
  }
  return false;
}

bool decide(PyObject* code, const FrameFilter& filter) {
  auto* c = reinterpret_cast<PyCodeObject*>(code);
  const char* file_c = PyUnicode_AsUTF8(c->co_filename);
  if (file_c == nullptr) {
    PyErr_Clear();
    return false;
  }
  std::string file(file_c);
  if (file.empty() || file[0] == '<') return false;  // <string>, <frozen ...>, <stdin>
  if (matches_any(filter.exclude, file)) return false;
  if (matches_any(filter.include, file)) return true;
  for (const std::string& prefix : filter.skip_prefixes) {
    if (starts_with(file, prefix)) return false;
  }
  return longest_prefix(g_default_skips, file) <= longest_prefix(g_default_keeps, file);
}

bool eligible(PyObject* code, const FrameFilter& filter, bool for_run) {
  Eligibility* e = vm::CodeExtra<Eligibility>::get(code, true);
  if (e == nullptr) return decide(code, filter);
  if (e->generation != g_filter_generation) *e = Eligibility{g_filter_generation, -1, -1};
  int8_t& answer = for_run ? e->for_run : e->for_callees;
  if (answer < 0) answer = decide(code, filter) ? 1 : 0;
  return answer == 1;
}

PyObject* eval_frame(PyThreadState* ts, frame::Frame* f, int throwflag) {
  if (throwflag || t_paused || (t_options == nullptr && !g_global) ||
      !frame::is_fresh_function_frame(f) || frame::tracing_active(ts)) {
    return frame::eval_default(ts, f, throwflag);
  }
  PyObject* code = frame::code(f);
  int flags = reinterpret_cast<PyCodeObject*>(code)->co_flags;
  if (flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
    return frame::eval_default(ts, f, 0);  // left to CPython (their frames are resumed)
  }
  static const FrameFilter no_filter;
  const CompileOptions* options = t_options;
  if (options != nullptr) {
    if (code != t_code && !eligible(code, no_filter, false)) {
      return frame::eval_default(ts, f, 0);
    }
  } else {
    options = &g_global_options;
    if (!eligible(code, g_filter, true)) return frame::eval_default(ts, f, 0);
  }
  return drive_frame(ts, f, *options);  // which leaves skipped code to CPython
}

void install() {
  if (g_installed) return;
  frame::set_eval_frame_hook(eval_frame);
  g_installed = true;
}

}  // namespace

void enable_global_compilation(const CompileOptions& options, FrameFilter filter) {
  g_global_options = options;
  g_filter = std::move(filter);
  ++g_filter_generation;
  g_global = true;
  install();
}

void disable_global_compilation() { g_global = false; }

void set_default_skip_prefixes(std::vector<std::string> skips, std::vector<std::string> keeps) {
  g_default_skips = std::move(skips);
  g_default_keeps = std::move(keeps);
  ++g_filter_generation;
}

CompileScope::CompileScope(const CompileOptions& options, PyObject* code)
    : saved_options_(t_options), saved_code_(t_code) {
  install();
  t_options = &options;
  t_code = code;
}

CompileScope::~CompileScope() {
  t_options = saved_options_;
  t_code = saved_code_;
}

HookPause::HookPause() : saved_(t_paused) { t_paused = true; }
HookPause::~HookPause() { t_paused = saved_; }

}  // namespace dynvm::runtime
