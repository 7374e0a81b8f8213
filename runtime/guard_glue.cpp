// Lowering a guard set to the glue IR, compiling it, and calling the result.
#include "dynvm/runtime/guard_glue.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "dynvm/codegen/glue_jit.h"
#include "dynvm/codegen/run_glue.h"
#include "dynvm/vm/guard_eval.h"
#include "dynvm/vm/source_resolver.h"

namespace dynvm::runtime {

namespace {

// The program's parameters, filled from a call's FrameInputs.
enum Param : int64_t {
  kInputs = 0,  // const vm::FrameInputs*
  kLocals,      // PyObject* const*
  kLocalCount,
  kStack,  // PyObject* const*
  kStackCount,
  kRunWanted,  // nonzero: run the graph after the guards (a native function)
  kParamCount
};

using codegen::glue_pointer;
using codegen::glue_word;

// Helpers the compiled code calls. They never throw and leave no Python error set.

// A new reference to the source `entry` of a table, read from its resolved `base`, or 0.
int64_t glue_read_source(int64_t entry, int64_t base, int64_t inputs) noexcept {
  try {
    PyObject* value = vm::read_source_entry(*glue_pointer<const vm::SourceTable::Entry>(entry),
                                            glue_pointer<PyObject>(base),
                                            *glue_pointer<const vm::FrameInputs>(inputs));
    if (value == nullptr && PyErr_Occurred()) PyErr_Clear();
    return glue_word(value);
  } catch (...) {
    if (PyErr_Occurred()) PyErr_Clear();
    return 0;
  }
}

// 1 when `guard` holds for its resolved value (0 for the global-state kinds), else 0.
int64_t glue_check_guard(int64_t guard, int64_t value) noexcept {
  try {
    return vm::guard_check(*glue_pointer<const vm::Guard>(guard), glue_pointer<PyObject>(value))
               ? 1
               : 0;
  } catch (...) {
    return 0;
  }
}

class GuardLowering {
 public:
  GuardLowering(const vm::GuardSet& guards, const std::string& name) : guards_(guards) {
    program_.name = name;
    program_.param_count = kParamCount;
    program_.slot_count = static_cast<int>(guards.sources().size());
    resolved_.assign(guards.sources().size(), -1);
  }

  codegen::GlueProgram lower(const GlueRun* run = nullptr, GlueRunSlots* slots = nullptr) {
    const std::vector<vm::Guard>& list = guards_.guards();
    for (size_t i = 0; i < list.size(); ++i) lower_guard(list[i], static_cast<int64_t>(i));
    if (run != nullptr) {
      program_.check_nonzero(param(kRunWanted), kGlueGuardsOnly);
      *slots = lower_glue_run(
          program_, *run, [this](int slot, int64_t fail) { return resolve(slot, fail); },
          kGlueRunFailed);
    }
    return std::move(program_);
  }

 private:
  int param(Param which) {
    if (params_[which] < 0) params_[which] = program_.param(which);
    return params_[which];
  }

  int type_of(int object) {
    return program_.load(object, static_cast<int64_t>(offsetof(PyObject, ob_type)));
  }

  // The value of source `slot`, read (once) on the way to guard `guard`: when it cannot be
  // read, that guard fails, as in the interpreter.
  int resolve(int slot, int64_t guard) {
    if (resolved_[static_cast<size_t>(slot)] >= 0) return resolved_[static_cast<size_t>(slot)];
    const vm::SourceTable::Entry& entry = guards_.sources()[slot];
    int value = -1;
    if (entry.kind == vm::Source::Kind::Local || entry.kind == vm::Source::Kind::Stack) {
      bool local = entry.kind == vm::Source::Kind::Local;
      // Unsigned: a negative index is out of range too.
      int index = program_.constant(entry.index);
      program_.check_ult(index, param(local ? kLocalCount : kStackCount), guard);
      value = program_.load(param(local ? kLocals : kStack),
                            entry.index * static_cast<int64_t>(sizeof(PyObject*)));
      program_.check_nonzero(value, guard);  // an unbound local
    } else {
      int base = entry.base >= 0 ? resolve(entry.base, guard) : program_.constant(0);
      int read =
          program_.add_helper("read_source", 3, reinterpret_cast<const void*>(&glue_read_source));
      value = program_.call(read, {program_.constant_address(&entry), base, param(kInputs)});
      program_.store(slot, value);  // a new reference: the caller releases it
      program_.check_nonzero(value, guard);
    }
    resolved_[static_cast<size_t>(slot)] = value;
    return value;
  }

  // The object a guard compares with: a constant, or read through its weak reference on
  // each check (None once it is gone), since its address may be reused after it dies.
  int guarded(const vm::GuardedObject& object) {
    if (!object.weak()) return program_.constant_address(object.holder());
    return program_.load(program_.constant_address(object.holder()),
                         static_cast<int64_t>(vm::GuardedObject::kReferentOffset));
  }

  void lower_guard(const vm::Guard& guard, int64_t index) {
    int value = guard.source >= 0 ? resolve(guard.source, index) : program_.constant(0);
    switch (guard.kind) {
      case vm::GuardKind::TypeMatch:
        // A type is never None, which a weakly held type that is gone reads as.
        program_.check_eq(type_of(value), guarded(guard.as<vm::TypeMatchPayload>().type), index);
        return;
      case vm::GuardKind::IdMatch: {
        const vm::GuardedObject& object = guard.as<vm::IdMatchPayload>().object;
        program_.check_eq(value, guarded(object), index);
        if (object.weak()) {  // gone, it reads as None: None must not match it
          program_.check_ne(value, program_.constant_address(Py_None), index);
        }
        return;
      }
      case vm::GuardKind::LenMatch: {
        const auto& payload = guard.as<vm::LenMatchPayload>();
        PyObject* type = payload.type.get();
        if (type == reinterpret_cast<PyObject*>(&PyList_Type) ||
            type == reinterpret_cast<PyObject*>(&PyTuple_Type)) {
          program_.check_eq(type_of(value), program_.constant_address(type), index);
          int size = program_.load(value, static_cast<int64_t>(offsetof(PyVarObject, ob_size)));
          program_.check_eq(size, program_.constant(static_cast<int64_t>(payload.length)), index);
          return;
        }
        break;
      }
      case vm::GuardKind::DuplicateInput:
        program_.check_eq(value, resolve(guard.as<vm::DuplicateInputPayload>().first, index),
                          index);
        return;
      case vm::GuardKind::TensorMatch:
        // Most mismatches are another type (None, a number): decided without the call.
        program_.check_eq(type_of(value), guarded(guard.as<vm::TensorMatchPayload>().spec.type),
                          index);
        break;
      default:
        break;
    }
    int check =
        program_.add_helper("check_guard", 2, reinterpret_cast<const void*>(&glue_check_guard));
    program_.check_nonzero(program_.call(check, {program_.constant_address(&guard), value}), index);
  }

  const vm::GuardSet& guards_;
  codegen::GlueProgram program_;
  std::vector<int> resolved_;  // per source slot: its value number once read, else -1
  int params_[kParamCount] = {-1, -1, -1, -1, -1, -1};
};

}  // namespace

codegen::GlueProgram GuardGlue::lower(const vm::GuardSet& guards, const std::string& name) {
  return GuardLowering(guards, name).lower();
}

Expected<std::unique_ptr<GuardGlue>> GuardGlue::compile(const vm::GuardSet& guards,
                                                        const std::string& name,
                                                        const GlueRun* run) {
  GlueRunSlots slots;
  codegen::GlueProgram program = GuardLowering(guards, name).lower(run, &slots);
  Expected<codegen::CompiledGlue> compiled = codegen::compile_glue(program);
  if (!compiled) return compiled.error();
  std::unique_ptr<GuardGlue> glue(new GuardGlue(guards));
  glue->function_ = compiled->function;
  glue->compile_ms_ = compiled->milliseconds;
  glue->slot_count_ = program.slot_count;
  glue->run_slots_ = run != nullptr ? slots : GlueRunSlots{program.slot_count, -1, -1};
  return glue;
}

int64_t* GlueValues::reset(int count, int refs, int frame_slot, int result_slot) {
  release();
  if (count > kInlineSlots) {
    heap_.reset(new int64_t[static_cast<size_t>(count)]);
    words_ = heap_.get();
  } else {
    words_ = inline_;
  }
  std::fill(words_, words_ + count, 0);
  count_ = count;
  refs_ = refs;
  frame_slot_ = frame_slot;
  result_slot_ = result_slot;
  return words_;
}

void GlueValues::release() {
  for (int i = 0; i < refs_ && i < count_; ++i) {
    Py_XDECREF(glue_pointer<PyObject>(words_[i]));
  }
  if (frame_slot_ >= 0 && frame_slot_ < count_) codegen::delete_run_frame(frame());
  count_ = 0;
  refs_ = 0;
  frame_slot_ = -1;
  result_slot_ = -1;
  run_ = Run::None;
}

codegen::RunFrame* GlueValues::frame() const {
  return frame_slot_ >= 0 && frame_slot_ < count_
             ? glue_pointer<codegen::RunFrame>(words_[frame_slot_])
             : nullptr;
}

PyObject* GlueValues::take_result() {
  if (result_slot_ < 0 || result_slot_ >= count_) return nullptr;
  PyObject* result = glue_pointer<PyObject>(words_[result_slot_]);
  words_[result_slot_] = 0;
  return result;
}

int64_t GuardGlue::call(const vm::FrameInputs& inputs, GlueValues* values, bool run) const {
  int64_t params[kParamCount] = {glue_word(&inputs), glue_word(inputs.locals),
                                 inputs.local_count, glue_word(inputs.stack),
                                 inputs.stack_count, run ? 1 : 0};
  return function_(params, values->reset(slot_count_, run_slots_.ref_slots, run_slots_.frame_slot,
                                         run_slots_.result_slot));
}

int64_t GuardGlue::first_failure(const vm::FrameInputs& inputs, GlueValues* keep) const {
  if (PyErr_Occurred()) {
    // The interpreter keeps a pending error aside while it checks; so does this path.
    vm::GuardFailure why;
    return vm::guards_hold(guards_, inputs, &why) ? -1 : static_cast<int64_t>(why.index);
  }
  GlueValues scratch;  // released on return unless the caller keeps the values
  GlueValues* values = keep != nullptr ? keep : &scratch;
  int64_t failed = call(inputs, values, false);
  if (failed == codegen::kGluePassed || failed == kGlueGuardsOnly) return -1;
  values->release();
  return failed;
}

int64_t GuardGlue::check_and_run(const vm::FrameInputs& inputs, GlueValues* values) const {
  if (PyErr_Occurred() || !runs()) {
    int64_t failed = first_failure(inputs, values);
    return failed;  // values->run() stays None: the caller runs the graph itself
  }
  int64_t code = call(inputs, values, true);
  if (code == codegen::kGluePassed) {
    codegen::run_frame_finish(*values->frame());
    values->run_ = GlueValues::Run::Done;
    return -1;
  }
  if (code == kGlueRunFailed) {
    codegen::RunFrame* frame = values->frame();
    std::string error = frame != nullptr ? codegen::run_frame_error(*frame) : "out of memory";
    values->release();
    values->run_ = GlueValues::Run::Failed;
    values->run_error_ = error.empty() ? "dynvm: the compiled run failed" : error;
    return kGlueRunFailed;
  }
  values->release();
  return code;
}

const GuardGluePolicy& guard_glue_policy() {
  static const GuardGluePolicy policy = [] {
    GuardGluePolicy p;
    const char* run = std::getenv("DYNVM_GLUE_RUN");
    p.run = run == nullptr || std::strcmp(run, "off") != 0;
    if (const char* most = std::getenv("DYNVM_GUARD_GLUE_MAX")) {
      char* end = nullptr;
      long long n = std::strtoll(most, &end, 10);
      if (end != most && *end == '\0' && n >= 0) p.max_guards = static_cast<size_t>(n);
    }
    const char* setting = std::getenv("DYNVM_GUARD_GLUE");
    if (setting == nullptr || *setting == '\0') return p;
    if (std::strcmp(setting, "off") == 0) {
      p.enabled = false;
      return p;
    }
    char* end = nullptr;
    long after = std::strtol(setting, &end, 10);
    if (end != setting && *end == '\0' && after >= 0) p.after_checks = static_cast<int>(after);
    return p;
  }();
  return policy;
}

}  // namespace dynvm::runtime
