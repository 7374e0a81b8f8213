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
#include "dynvm/support/expected.h"
#include "dynvm/vm/guard.h"

namespace dynvm::runtime {

// What a successful compiled check read: the value of every source a helper read (new
// references, released when this is destroyed or reused), by the guard set's source slot, so
// that the graph's inputs need not be read again. GIL held while it holds references.
class GlueValues {
 public:
  GlueValues() = default;
  ~GlueValues() { release(); }
  GlueValues(const GlueValues&) = delete;
  GlueValues& operator=(const GlueValues&) = delete;

  // Borrowed: the value of source slot `slot`, or nullptr when the check did not keep one.
  PyObject* value(int slot) const {
    return slot >= 0 && slot < count_
               ? reinterpret_cast<PyObject*>(static_cast<intptr_t>(words_[slot]))
               : nullptr;
  }
  // Releases what is held; no slots are left.
  void release() {
    for (int i = 0; i < count_; ++i) Py_XDECREF(reinterpret_cast<PyObject*>(words_[i]));
    count_ = 0;
  }

 private:
  friend class GuardGlue;
  // Releases what is held and returns `count` zeroed slots for a compiled check to fill.
  int64_t* reset(int count);

  static constexpr int kInlineSlots = 32;  // sets this small need no allocation
  int64_t inline_[kInlineSlots];
  std::unique_ptr<int64_t[]> heap_;
  int64_t* words_ = inline_;  // 0 or a new reference, per slot
  int count_ = 0;
};

class GuardGlue {
 public:
  // The program the guards lower to (no compilation). Inline: reading locals and value-stack
  // entries, type and identity checks, lengths of lists and tuples, the type test in front of
  // a tensor check. Calls: reading every other source (vm::read_source_entry, stored in a slot
  // whose reference the caller releases) and the remaining checks (vm::guard_check). The
  // program refers to `guards` by address: it must outlive any function compiled from it.
  static codegen::GlueProgram lower(const vm::GuardSet& guards, const std::string& name);

  // Lowers and compiles (an Error when the JIT is unavailable). `guards` is borrowed and must
  // outlive the result.
  static Expected<std::unique_ptr<GuardGlue>> compile(const vm::GuardSet& guards,
                                                      const std::string& name);

  // GIL held. The index of the first guard that fails for this call, or -1 when all hold:
  // what vm::guards_hold decides, with the same side effects (attribute reads) in the same
  // order. Never raises; an error pending on entry is kept.
  // With `keep`, when every guard holds, the values the helpers read are handed to `keep`
  // instead of being released.
  int64_t first_failure(const vm::FrameInputs& inputs, GlueValues* keep = nullptr) const;
  bool holds(const vm::FrameInputs& inputs) const { return first_failure(inputs) < 0; }

  double compile_milliseconds() const { return compile_ms_; }

 private:
  GuardGlue(const vm::GuardSet& guards) : guards_(guards) {}

  const vm::GuardSet& guards_;
  codegen::GlueFunction function_ = nullptr;
  int slot_count_ = 0;
  double compile_ms_ = 0;
};

// How variants use compiled guards, from DYNVM_GUARD_GLUE (read once): "off" never compiles
// them; a number N compiles a variant's guards after N checks
// by the interpreter (0: when the variant is built). Default: 2, so a variant that is only
// ever used once costs no compilation.
struct GuardGluePolicy {
  bool enabled = true;
  int after_checks = 2;
};
const GuardGluePolicy& guard_glue_policy();

}  // namespace dynvm::runtime
