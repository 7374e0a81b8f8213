// Compiled guards: a variant's guard set lowered to the glue IR (codegen/glue_ir.h) and
// compiled through the CPU JIT. The compiled check reads each source once, in the order the
// C++ interpreter (vm::guards_hold) reads them, and reports the same first failing guard; the
// interpreter stays the reference and the only one that explains failures.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dynvm/codegen/glue_ir.h"
#include "dynvm/runtime/variant_glue.h"
#include "dynvm/support/expected.h"
#include "dynvm/vm/guard.h"

namespace dynvm::codegen {
class RunFrame;
}

namespace dynvm::runtime {

// What a variant's native function returns besides kGluePassed and the index of the first
// failing guard: the guards held and no run was asked for, or the run failed.
constexpr int64_t kGlueGuardsOnly = int64_t{1} << 62;
constexpr int64_t kGlueRunFailed = kGlueGuardsOnly + 1;

// What a successful compiled check read: the value of every source a helper read (new
// references, released when this is destroyed or reused), by the guard set's source slot, so
// that the graph's inputs need not be read again; and, when the native function also ran the
// graph, the finished run (its frame, and the packed return value when the glue packed it) or
// why it failed. GIL held while it holds references.
class GlueValues {
 public:
  GlueValues() = default;
  ~GlueValues() { release(); }
  GlueValues(const GlueValues&) = delete;
  GlueValues& operator=(const GlueValues&) = delete;

  // Borrowed: the value of source slot `slot`, or nullptr when the check did not keep one.
  PyObject* value(int slot) const {
    return slot >= 0 && slot < count_ ? codegen::glue_pointer<PyObject>(words_[slot]) : nullptr;
  }
  // Releases what is held (the run's frame included); no slots are left.
  void release();

  enum class Run : uint8_t { None, Done, Failed };
  // Whether the native function ran the graph for this call.
  Run run() const { return run_; }
  // Done: the finished run, whose outputs the caller may read.
  codegen::RunFrame* frame() const;
  // Done: the packed return value (a new reference the caller now owns), or nullptr when the
  // glue did not pack it.
  PyObject* take_result();
  // Failed: the error.
  const std::string& run_error() const { return run_error_; }

 private:
  friend class GuardGlue;
  // Releases what is held and returns `count` zeroed slots for a compiled check to fill, of
  // which the first `refs` hold references and `frame_slot` (when >= 0) a run frame.
  int64_t* reset(int count, int refs, int frame_slot, int result_slot);

  // Programs this small need no allocation per call (a native function's slots: the guards'
  // sources, the packed result and frame, and the kernels' data pointers).
  static constexpr int kInlineSlots = 64;
  int64_t inline_[kInlineSlots];
  std::unique_ptr<int64_t[]> heap_;
  int64_t* words_ = inline_;  // 0 or a new reference, per slot
  int count_ = 0;
  int refs_ = 0;
  int frame_slot_ = -1;
  int result_slot_ = -1;
  Run run_ = Run::None;
  std::string run_error_;
};

class GuardGlue {
 public:
  // The program the guards lower to (no compilation). Inline: reading locals and value-stack
  // entries, type and identity checks, lengths of lists and tuples, the type test in front of
  // a tensor check. Calls: reading every other source (vm::read_source_entry, stored in a slot
  // whose reference the caller releases) and the remaining checks (vm::guard_check). The
  // program refers to `guards` by address: it must outlive any function compiled from it.
  static codegen::GlueProgram lower(const vm::GuardSet& guards, const std::string& name);

  // Lowers and compiles (an Error when the JIT is unavailable). With `run`, the guards are
  // followed by the run (variant_glue.h), which the function does when asked to: the
  // variant's native function (check_and_run). `guards` and what `run` refers to are
  // borrowed and must outlive the result.
  static Expected<std::unique_ptr<GuardGlue>> compile(const vm::GuardSet& guards,
                                                      const std::string& name,
                                                      const GlueRun* run = nullptr);

  // GIL held. The index of the first guard that fails for this call, or -1 when all hold:
  // what vm::guards_hold decides, with the same side effects (attribute reads) in the same
  // order. Never raises; an error pending on entry is kept.
  // With `keep`, when every guard holds, the values the helpers read are handed to `keep`
  // instead of being released.
  int64_t first_failure(const vm::FrameInputs& inputs, GlueValues* keep = nullptr) const;
  bool holds(const vm::FrameInputs& inputs) const { return first_failure(inputs) < 0; }

  // With a run compiled in: checks the guards and, when all hold, runs the graph. -1 when it
  // ran (`values` holds the run), kGlueRunFailed when the run failed (values->run_error()
  // says why), else the first failing guard's index.
  int64_t check_and_run(const vm::FrameInputs& inputs, GlueValues* values) const;
  bool runs() const { return run_slots_.frame_slot >= 0; }

  double compile_milliseconds() const { return compile_ms_; }

 private:
  GuardGlue(const vm::GuardSet& guards) : guards_(guards) {}

  const vm::GuardSet& guards_;
  int64_t call(const vm::FrameInputs& inputs, GlueValues* values, bool run) const;

  codegen::GlueFunction function_ = nullptr;
  int slot_count_ = 0;
  GlueRunSlots run_slots_;
  double compile_ms_ = 0;
};

// How variants use compiled guards, from DYNVM_GUARD_GLUE (read once): "off" never compiles
// them; a number N compiles a variant's guards after N checks
// by the interpreter (0: when the variant is built). Default: 2, so a variant that is only
// ever used once costs no compilation.
// DYNVM_GLUE_RUN=off keeps the graph's run out of the compiled function (guards only).
// DYNVM_GUARD_GLUE_MAX=N: sets of more than N guards stay with the interpreter (default 512):
// compiled, a set is straight-line code of some 60 bytes per guard, and past a few hundred
// guards that code no longer stays in the instruction cache between calls: 1,955 guards
// (EfficientNet-B0) checked in 120 us compiled against 94 us interpreted, after 97 ms of
// compilation (docs/benchmarks.md).
struct GuardGluePolicy {
  bool enabled = true;
  int after_checks = 2;
  bool run = true;
  size_t max_guards = 512;
};
const GuardGluePolicy& guard_glue_policy();

}  // namespace dynvm::runtime
