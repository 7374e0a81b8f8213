// Progress of a long compile, shared by the layers: the VM notes the operators it has
// traced, code generation the kernels it has compiled, and the runtime installs the
// reporter that shows them (runtime/compile_progress.h: a one-line status on stderr once a
// call has spent about two seconds tracing and compiling). Without a reporter, noting costs
// one atomic load.
#pragma once

#include <atomic>
#include <cstddef>

namespace dynvm::progress {

class Reporter {
 public:
  virtual ~Reporter() = default;
  // The trace in progress holds `count` operators. Called with the GIL held.
  virtual void ops_traced(size_t count) = 0;
  // `done` of the graph's `total` kernels are compiled. May be called from compiling threads.
  virtual void kernels_compiled(size_t done, size_t total) = 0;
};

// The installed reporter, or null.
inline std::atomic<Reporter*>& current() {
  static std::atomic<Reporter*> reporter{nullptr};
  return reporter;
}

inline void ops_traced(size_t count) {
  if (Reporter* r = current().load(std::memory_order_acquire)) r->ops_traced(count);
}

inline void kernels_compiled(size_t done, size_t total) {
  if (Reporter* r = current().load(std::memory_order_acquire)) r->kernels_compiled(done, total);
}

}  // namespace dynvm::progress
