// Calls that emit a log record, deferred to run after the graph in the order of the other
// side effects instead of breaking the graph where logging reads its caller's frame.

#include <Python.h>

#include <optional>
#include <string>
#include <vector>

#include "dynvm/vm/source.h"
#include "inline_frame.h"
#include "known_objects.h"
#include "trace_context.h"

namespace dynvm::vm {
namespace {

// The emitting methods of logging.Logger, with the level each logs at (0: the first
// argument is the level, as for `log`).
struct LoggingMethod {
  const char* name;
  int level;
};
constexpr LoggingMethod kLoggingMethods[] = {
    {"debug", 10},    {"info", 20},  {"warning", 30}, {"error", 40},
    {"critical", 50}, {"fatal", 50}, {"log", 0},
};

// A value the deferred call may receive as it was when traced: an immutable constant. A
// tensor or a container could change before the call runs, after the graph.
bool is_frozen_constant(PyObject* o) {
  if (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
      PyUnicode_CheckExact(o) || PyBytes_CheckExact(o)) {
    return true;
  }
  if (!PyTuple_CheckExact(o)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
    if (!is_frozen_constant(PyTuple_GET_ITEM(o, i))) return false;
  }
  return true;
}

// The logging module's Logger and RootLogger, when the process has imported logging.
bool is_plain_logger(PyObject* object) {
  PyRef name = PyRef::steal(PyUnicode_InternFromString("logging"));
  PyRef module = PyRef::steal(name ? PyImport_GetModule(name.get()) : nullptr);
  if (!module) {
    PyErr_Clear();
    return false;
  }
  for (const char* cls : {"Logger", "RootLogger"}) {
    PyRef type = PyRef::steal(PyObject_GetAttrString(module.get(), cls));
    if (!type) {
      PyErr_Clear();
      continue;
    }
    if (reinterpret_cast<PyObject*>(Py_TYPE(object)) == type.get()) return true;
  }
  return false;
}

// The value of `value` when it is a frozen constant, also a tuple the trace holds item by
// item (a tuple of the code's constants); null otherwise.
PyRef frozen_value(const ValuePtr& value) {
  if (value->is_constant()) {
    return is_frozen_constant(value->py()) ? PyRef::borrow(value->py()) : PyRef();
  }
  if (!value->is(TracedValue::Kind::Tuple) || value->is_size || value->class_value) return PyRef();
  PyRef tuple = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(value->items.size())));
  if (!tuple) unsupported_from_python_error("a logging call's arguments");
  for (size_t i = 0; i < value->items.size(); ++i) {
    PyRef item = frozen_value(value->items[i]);
    if (!item) return PyRef();
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), item.release());
  }
  return tuple;
}

// A call of `fn` on a plain logger (args[0]) with frozen arguments, as a side effect that
// makes it after the graph: `logger.<fn's name>(*args[1:], **kwargs)`, where that name
// binds `fn` to this logger (the class's method, not an instance attribute, and not
// another function called with a logger first). Null when the call is not one; `level`
// receives the first argument when it is an int (the level of `log`), `stacklevel` the
// keyword's value (1 when not given).
std::optional<TraceContext::PendingSideEffect> logging_call_effect(
    PyObject* fn, const std::vector<ValuePtr>& args, const KwArgs& kwargs, std::string* name,
    long* first_int, long* stacklevel) {
  if (fn == nullptr || args.empty() || !args[0]->source) return std::nullopt;
  PyObject* logger = args[0]->py();
  if (logger == nullptr || !is_plain_logger(logger)) return std::nullopt;
  PyRef name_object = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
  if (!name_object || !PyUnicode_Check(name_object.get())) {
    PyErr_Clear();
    return std::nullopt;
  }
  PyRef bound = PyRef::steal(PyObject_GetAttr(logger, name_object.get()));
  if (!bound || !PyMethod_Check(bound.get()) || PyMethod_GET_FUNCTION(bound.get()) != fn ||
      PyMethod_GET_SELF(bound.get()) != logger) {
    PyErr_Clear();
    return std::nullopt;
  }
  *name = PyUnicode_AsUTF8(name_object.get());
  std::vector<ValuePtr> call_args;
  for (size_t i = 1; i < args.size(); ++i) {
    PyRef frozen = frozen_value(args[i]);
    if (!frozen) return std::nullopt;
    call_args.push_back(TracedValue::constant(std::move(frozen)));
  }
  *first_int = call_args.empty() || !PyLong_CheckExact(call_args[0]->py())
                   ? -1
                   : PyLong_AsLong(call_args[0]->py());
  // stacklevel only, a constant of at least 1 (the caller, or frames further out, which
  // the caller of this function must find among the traced frames): exc_info and
  // stack_info read the state at the call.
  *stacklevel = 1;
  PyRef keywords = PyRef::steal(PyDict_New());
  for (const auto& [key, value] : kwargs) {
    if (key != "stacklevel" || !value->is_constant() || !PyLong_CheckExact(value->py())) {
      return std::nullopt;
    }
    *stacklevel = PyLong_AsLong(value->py());
    if (*stacklevel < 1) {
      PyErr_Clear();
      return std::nullopt;
    }
    if (PyDict_SetItemString(keywords.get(), key.c_str(), value->py()) < 0) {
      unsupported_from_python_error("a logging call's keywords");
    }
  }
  ValuePtr value = TracedValue::tuple(
      {TracedValue::tuple(std::move(call_args)), TracedValue::constant(std::move(keywords))});
  return TraceContext::PendingSideEffect{SideEffect::Kind::CallMethod, args[0]->source, *name,
                                         value};
}

}  // namespace

ValuePtr defer_logging_call(TraceContext& ctx, const ValuePtr& callable,
                            const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  std::string name;
  long first_int = -1;
  long stacklevel = 1;
  std::optional<TraceContext::PendingSideEffect> effect =
      logging_call_effect(callable->py(), args, kwargs, &name, &first_int, &stacklevel);
  if (!effect || ctx.executing_frame == nullptr) return nullptr;
  const LoggingMethod* method = nullptr;
  for (const LoggingMethod& m : kLoggingMethods) {
    if (name == m.name) method = &m;
  }
  if (method == nullptr) return nullptr;
  long level = method->level != 0 ? method->level : first_int;
  if (level < 0) return nullptr;
  // A level the logger does not emit: the call is traced as usual, which guards on what
  // makes it so and leaves nothing to run.
  PyRef enabled = PyRef::steal(PyObject_CallMethod(args[0]->py(), "isEnabledFor", "l", level));
  if (!enabled) {
    PyErr_Clear();
    return nullptr;
  }
  if (enabled.get() != Py_True) return nullptr;
  // The record is made by dynvm._tracing.emit_log with the place of the call, which
  // logging would have found in the caller's frame: emit_log(logger, level, filename,
  // lineno, function, msg, *args). The stacklevel keyword has chosen that place.
  std::vector<ValuePtr> emit_args = {args[0]};
  // As logging's findCaller does, the stacklevel-th frame outwards that is not logging's
  // own (`logging.info` calls the root logger's `info`) nor importlib's bootstrap; past
  // the traced frames, the graph breaks at the call as before.
  PyRef logging_module = PyRef::steal(PyImport_ImportModule("logging"));
  PyRef source_file = PyRef::steal(
      logging_module ? PyObject_GetAttrString(logging_module.get(), "_srcfile") : nullptr);
  if (!source_file) unsupported_from_python_error("reading logging._srcfile");
  std::string internal =
      PyUnicode_Check(source_file.get()) ? PyUnicode_AsUTF8(source_file.get()) : std::string();
  auto is_internal = [&](const InlineFrame* frame) {
    const std::string& file = frame->code().filename;
    return (!internal.empty() && file == internal) ||
           (file.find("importlib") != std::string::npos &&
            file.find("_bootstrap") != std::string::npos);
  };
  const InlineFrame* caller = ctx.executing_frame;
  for (long remaining = stacklevel;; caller = caller->caller()) {
    if (caller == nullptr) return nullptr;
    if (!is_internal(caller) && --remaining == 0) break;
  }
  const frontend::CodeInfo& code = caller->code();
  emit_args.push_back(TracedValue::constant(PyRef::steal(PyLong_FromLong(level))));
  emit_args.push_back(
      TracedValue::constant(PyRef::steal(PyUnicode_FromString(code.filename.c_str()))));
  emit_args.push_back(TracedValue::constant(PyRef::steal(PyLong_FromLong(caller->current_line()))));
  emit_args.push_back(TracedValue::constant(PyRef::steal(PyUnicode_FromString(code.name.c_str()))));
  const std::vector<ValuePtr>& call_args = effect->value->items[0]->items;
  // `log` has the level first, the others start with the message.
  emit_args.insert(emit_args.end(), call_args.begin() + (method->level == 0 ? 1 : 0),
                   call_args.end());
  ValuePtr value = TracedValue::tuple({TracedValue::tuple(std::move(emit_args)),
                                       TracedValue::constant(PyRef::steal(PyDict_New()))});
  ctx.side_effects.push_back(TraceContext::PendingSideEffect{
      SideEffect::Kind::CallMethod, Source::module("dynvm._tracing"), "emit_log", value});
  return TracedValue::constant(PyRef::borrow(Py_None));
}

bool defer_cached_logging_call(TraceContext& ctx, const ValuePtr& callable,
                               const std::vector<ValuePtr>& args, const KwArgs& kwargs,
                               size_t first_effect, const ValuePtr& result) {
  if (first_effect >= ctx.side_effects.size() || !result->is_constant() ||
      result->py() != Py_None) {
    return false;
  }
  for (size_t e = first_effect; e < ctx.side_effects.size(); ++e) {
    if (ctx.side_effects[e].kind != SideEffect::Kind::CallMethod) return false;
  }
  std::string name;
  long first_int = -1;
  long stacklevel = 1;
  std::optional<TraceContext::PendingSideEffect> effect =
      logging_call_effect(callable->py(), args, kwargs, &name, &first_int, &stacklevel);
  // The method runs after the graph, where frames past its caller are not the traced ones.
  if (!effect || stacklevel != 1) return false;
  ctx.side_effects.resize(first_effect);
  ctx.side_effects.push_back(std::move(*effect));
  return true;
}

}  // namespace dynvm::vm
