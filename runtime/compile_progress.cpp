// CompileProgress: the one-line status a long compile shows on stderr.
#include "dynvm/runtime/compile_progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace dynvm::runtime {

namespace {

// DYNVM_PROGRESS: "1" on, "0" off, unset: on when stderr is a terminal.
bool progress_enabled(bool terminal) {
  const char* setting = std::getenv("DYNVM_PROGRESS");
  if (setting == nullptr || *setting == '\0') return terminal;
  return std::strcmp(setting, "0") != 0;
}

double progress_after_seconds() {
  const char* setting = std::getenv("DYNVM_PROGRESS_AFTER");
  if (setting == nullptr || *setting == '\0') return 2.0;
  char* end = nullptr;
  double seconds = std::strtod(setting, &end);
  return end != setting && seconds >= 0 ? seconds : 2.0;
}

}  // namespace

CompileProgress::CompileProgress(std::string what)
    : what_(std::move(what)),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(Clock::now()),
      last_shown_(start_) {
  enabled_ = progress_enabled(terminal_);
  after_s_ = progress_after_seconds();
  previous_ = progress::current().exchange(enabled_ ? this : nullptr, std::memory_order_acq_rel);
}

CompileProgress::~CompileProgress() {
  progress::current().store(previous_, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shown_) return;
  double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  std::string kernels =
      kernels_total_ > 0 ? ", " + std::to_string(kernels_total_) + " kernels" : std::string();
  std::fprintf(stderr, "%sdynvm: compiled %s: %zu ops%s in %.1f s\n", terminal_ ? "\r\033[K" : "",
               what_.c_str(), ops_, kernels.c_str(), seconds);
  std::fflush(stderr);
}

void CompileProgress::compiling() {
  std::lock_guard<std::mutex> lock(mutex_);
  compiling_ = true;
  show_locked();
}

void CompileProgress::ops_traced(size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  ops_ = count;
  show_locked();
}

void CompileProgress::kernels_compiled(size_t done, size_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  compiling_ = true;
  if (done > kernels_done_) kernels_done_ = done;
  kernels_total_ = total;
  show_locked();
}

void CompileProgress::show_locked() {
  if (!enabled_) return;
  Clock::time_point now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < after_s_) return;
  double since = std::chrono::duration<double>(now - last_shown_).count();
  if (shown_ && since < (terminal_ ? 0.1 : 1.0)) return;
  std::string doing;
  if (!compiling_) {
    doing = "tracing " + what_ + ": " + std::to_string(ops_) + " ops";
  } else if (kernels_total_ > 0) {
    doing = "compiling " + what_ + ": " + std::to_string(kernels_done_) + "/" +
            std::to_string(kernels_total_) + " kernels";
  } else {
    doing = "compiling " + what_ + ": " + std::to_string(ops_) + " ops traced";
  }
  std::fprintf(stderr, terminal_ ? "\r\033[Kdynvm: %s (%.1f s)" : "dynvm: %s (%.1f s)\n",
               doing.c_str(), elapsed);
  std::fflush(stderr);
  shown_ = true;
  last_shown_ = now;
}

}  // namespace dynvm::runtime
