// `warnings.warn(...)` in traced code, deferred to run after the graph in the order of the
// other side effects instead of breaking the graph where warnings reads its caller's frame.

#include <Python.h>

#include <string>
#include <vector>

#include "dynvm/vm/guard.h"
#include "dynvm/vm/source.h"
#include "inline_frame.h"
#include "trace_context.h"

namespace dynvm::vm {
namespace {

// The warnings module when the process has imported it, else null.
PyRef warnings_module() {
  PyRef name = PyRef::steal(PyUnicode_InternFromString("warnings"));
  PyRef module = PyRef::steal(name ? PyImport_GetModule(name.get()) : nullptr);
  if (!module) PyErr_Clear();
  return module;
}

// What warn's arguments say, when the deferred call can make it as eager would: a str
// message, a Warning subclass (UserWarning for None), a constant stacklevel, no source
// object and no skipped prefixes.
struct WarnArguments {
  PyObject* message = nullptr;
  PyObject* category = nullptr;
  long stacklevel = 1;
};

bool read_arguments(const std::vector<ValuePtr>& args, const KwArgs& kwargs, WarnArguments* out) {
  static const char* const kNames[] = {"message", "category", "stacklevel", "source"};
  std::vector<const ValuePtr*> bound(4, nullptr);
  if (args.size() > 4) return false;
  for (size_t i = 0; i < args.size(); ++i) bound[i] = &args[i];
  for (const auto& [key, value] : kwargs) {
    if (key == "skip_file_prefixes") {
      // Python 3.12's keyword: only the empty default changes nothing.
      if (!value->is_constant() || !PyTuple_CheckExact(value->py()) ||
          PyTuple_GET_SIZE(value->py()) != 0) {
        return false;
      }
      continue;
    }
    size_t slot = 4;
    for (size_t i = 0; i < 4; ++i) {
      if (key == kNames[i]) slot = i;
    }
    if (slot == 4 || bound[slot] != nullptr) return false;
    bound[slot] = &value;
  }
  // The category is a class (traced as a class value, read by identity), the rest constants.
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i] == nullptr) continue;
    const ValuePtr& value = *bound[i];
    bool known = i == 1 ? value->py() != nullptr : value->is_constant();
    if (!known) return false;
  }
  if (bound[0] == nullptr || !PyUnicode_CheckExact((*bound[0])->py())) return false;
  out->message = (*bound[0])->py();
  out->category = PyExc_UserWarning;
  if (bound[1] != nullptr && (*bound[1])->py() != Py_None) {
    PyObject* category = (*bound[1])->py();
    if (!PyType_Check(category)) return false;
    int is_warning = PyObject_IsSubclass(category, PyExc_Warning);
    if (is_warning != 1) {
      PyErr_Clear();
      return false;  // warn raises a TypeError: eager does so where the call is
    }
    out->category = category;
  }
  if (bound[2] != nullptr) {
    PyObject* level = (*bound[2])->py();
    if (!PyLong_CheckExact(level)) return false;
    out->stacklevel = PyLong_AsLong(level);
    if (out->stacklevel == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
  }
  return bound[3] == nullptr || (*bound[3])->py() == Py_None;
}

}  // namespace

ValuePtr defer_warning_call(TraceContext& ctx, const ValuePtr& callable,
                            const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  PyObject* fn = callable->py();
  if (fn == nullptr || ctx.executing_frame == nullptr) return nullptr;
  PyRef warnings = warnings_module();
  if (!warnings) return nullptr;
  PyRef warn = PyRef::steal(PyObject_GetAttrString(warnings.get(), "warn"));
  if (!warn) {
    PyErr_Clear();
    return nullptr;
  }
  if (warn.get() != fn) return nullptr;
  WarnArguments arguments;
  if (!read_arguments(args, kwargs, &arguments)) return nullptr;
  // The frame warn reads: stacklevel 1 is the caller of warn, each level one further out.
  // A level past the traced frames is the compiled function's caller, which the deferred
  // call could not name: the graph breaks there, as before.
  const InlineFrame* frame = ctx.executing_frame;
  for (long level = 1; level < arguments.stacklevel && frame != nullptr; ++level) {
    frame = frame->caller();
  }
  if (frame == nullptr) return nullptr;
  PyObject* globals = frame->scope().globals.get();
  if (globals == nullptr || !PyDict_Check(globals)) return nullptr;
  // The module name warn gives the filters, from the frame's globals as warn reads it.
  PyObject* module_name = PyDict_GetItemString(globals, "__name__");
  PyRef module =
      PyRef::borrow(module_name != nullptr && PyUnicode_Check(module_name) ? module_name : nullptr);
  if (!module) module = PyRef::steal(PyUnicode_FromString("<string>"));
  PyRef lineno = PyRef::steal(PyLong_FromLong(frame->current_line()));
  PyRef filename = PyRef::steal(PyUnicode_FromString(frame->code().filename.c_str()));
  PyRef tracing = PyRef::steal(PyImport_ImportModule("dynvm._tracing"));
  PyRef action = PyRef::steal(tracing ? PyObject_CallMethod(tracing.get(), "warning_action", "OOOO",
                                                            arguments.category, arguments.message,
                                                            module.get(), lineno.get())
                                      : nullptr);
  if (!action || !PyUnicode_Check(action.get())) {
    PyErr_Clear();
    return nullptr;
  }
  std::string what = PyUnicode_AsUTF8(action.get());
  // "error" raises where the call is, which only the eager path does at the right point.
  if (what == "error") return nullptr;
  // The filters decide what the call does (WARNING_FILTERS: equal entries, so a copy bound
  // by catch_warnings around each call is the same state).
  if (!ctx.guards.add_warning_filters()) return nullptr;
  ValuePtr none = TracedValue::constant(PyRef::borrow(Py_None));
  if (what == "ignore") return none;
  // emit_warning(message, category, filename, lineno, globals) makes what warn makes at
  // that place: the registry and module read from the frame's globals after the graph.
  std::vector<ValuePtr> emit_args = {
      TracedValue::constant(PyRef::borrow(arguments.message)),
      TracedValue::constant(PyRef::borrow(arguments.category)),
      TracedValue::constant(std::move(filename)),
      TracedValue::constant(std::move(lineno)),
      TracedValue::constant(PyRef::borrow(globals)),
  };
  ValuePtr value = TracedValue::tuple({TracedValue::tuple(std::move(emit_args)),
                                       TracedValue::constant(PyRef::steal(PyDict_New()))});
  ctx.side_effects.push_back(TraceContext::PendingSideEffect{
      SideEffect::Kind::CallMethod, Source::module("dynvm._tracing"), "emit_warning", value});
  return none;
}

}  // namespace dynvm::vm
