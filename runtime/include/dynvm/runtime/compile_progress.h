// CompileProgress: the one-line status a long compile shows on stderr.
//
// While alive, it is the installed progress::Reporter: the VM reports the operators traced,
// code generation the kernels compiled. Once the call has spent DYNVM_PROGRESS_AFTER seconds
// (default 2) tracing and compiling, a status line says what it is doing, e.g.
//   dynvm: compiling ResNet.forward from model.py:120: 14/57 kernels (3.1 s)
// rewritten in place on a terminal (at most 10 times a second), a new line at most once a
// second otherwise; when a line was shown, the end says how long the whole took. On by
// default when stderr is a terminal; DYNVM_PROGRESS=1 or 0 turns it on or off anywhere.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

#include "dynvm/support/progress.h"

namespace dynvm::runtime {

class CompileProgress final : public progress::Reporter {
 public:
  // `what` names the code being compiled ("ResNet.forward from model.py:120").
  explicit CompileProgress(std::string what);
  ~CompileProgress() override;
  CompileProgress(const CompileProgress&) = delete;
  CompileProgress& operator=(const CompileProgress&) = delete;

  // From tracing to compiling: the kernels come next.
  void compiling();

  void ops_traced(size_t count) override;
  void kernels_compiled(size_t done, size_t total) override;

 private:
  using Clock = std::chrono::steady_clock;
  void show_locked();  // mutex_ held

  std::string what_;
  bool enabled_;
  bool terminal_;
  double after_s_;
  Clock::time_point start_;
  Clock::time_point last_shown_;
  bool shown_ = false;
  bool compiling_ = false;
  size_t ops_ = 0;
  size_t kernels_done_ = 0;
  size_t kernels_total_ = 0;
  progress::Reporter* previous_;
  std::mutex mutex_;
};

}  // namespace dynvm::runtime
