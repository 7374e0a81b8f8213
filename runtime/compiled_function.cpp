// CompiledFunction: guard checks, tracing on a miss, recompiles, breaks and logging.
#include "dynvm/runtime/compiled_function.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "dynvm/graph/graph_printer.h"
#include "dynvm/runtime/argument_binding.h"
#include "dynvm/runtime/variant.h"

namespace dynvm::runtime {

namespace {

uint64_t g_epoch = 1;
PyObject* g_graph_break_error = nullptr;  // owned; set once by the module

bool log_enabled(const char* what) {
  const char* logs = std::getenv("DYNVM_LOGS");
  if (logs == nullptr) return false;
  std::string all(logs);
  size_t start = 0;
  while (start <= all.size()) {
    size_t comma = all.find(',', start);
    std::string item =
        all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == what || item == "all") return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

std::string function_name(PyObject* function) {
  auto* f = reinterpret_cast<PyFunctionObject*>(function);
  auto* code = reinterpret_cast<PyCodeObject*>(f->func_code);
  std::string name = PyUnicode_AsUTF8(f->func_qualname);
  return name + " (" + PyUnicode_AsUTF8(code->co_filename) + ":" +
         std::to_string(code->co_firstlineno) + ")";
}

vm::FrameInputs frame_inputs(PyObject* function, const std::vector<PyObject*>& locals) {
  auto* f = reinterpret_cast<PyFunctionObject*>(function);
  vm::FrameInputs in;
  in.locals = locals.data();
  in.local_count = static_cast<int>(locals.size());
  in.closure = f->func_closure;
  in.globals = f->func_globals;
  PyObject* b = PyDict_GetItemString(f->func_globals, "__builtins__");  // borrowed
  if (b != nullptr && PyModule_Check(b)) b = PyModule_GetDict(b);
  in.builtins = b != nullptr ? b : PyEval_GetBuiltins();
  return in;
}

}  // namespace

Counters& counters() {
  static Counters c;
  return c;
}

void reset_all() {
  counters() = Counters{};
  ++g_epoch;
}

void set_graph_break_error_type(PyObject* type) {
  Py_XINCREF(type);
  Py_XSETREF(g_graph_break_error, type);
}

CompiledFunction::CompiledFunction(PyObject* function, CompileOptions options)
    : function_(PyRef::borrow(function)), options_(std::move(options)), epoch_(g_epoch) {}

CompiledFunction::~CompiledFunction() = default;

PyObject* CompiledFunction::call_eagerly(PyObject* args, PyObject* kwargs) {
  ++counters().eager_calls;
  return PyObject_Call(function_.get(), args, kwargs);
}

PyObject* CompiledFunction::raise_graph_break(const vm::GraphBreakInfo& info) {
  std::string message = "dynvm: graph break in " + function_name(function_.get()) + ": " +
                        info.reason + " (at " + info.filename + ":" + std::to_string(info.lineno) +
                        "); fullgraph=True forbids breaks";
  PyErr_SetString(g_graph_break_error ? g_graph_break_error : PyExc_RuntimeError, message.c_str());
  return nullptr;
}

PyObject* CompiledFunction::call(PyObject* args, PyObject* kwargs) {
  if (epoch_ != g_epoch) {  // dynvm.reset() since the last call
    variants_.clear();
    gave_up_ = false;
    epoch_ = g_epoch;
  }
  if (gave_up_) return call_eagerly(args, kwargs);
  std::vector<PyRef> bound;
  if (!bind_arguments(function_.get(), args, kwargs, &bound)) {
    return call_eagerly(args, kwargs);  // CPython raises the TypeError
  }
  std::vector<PyObject*> locals;
  locals.reserve(bound.size());
  for (const PyRef& r : bound) locals.push_back(r.get());
  vm::FrameInputs inputs = frame_inputs(function_.get(), locals);

  for (size_t i = 0; i < variants_.size(); ++i) {
    if (!variants_[i]->guards_hold(inputs)) continue;
    if (i != 0) std::swap(variants_[0], variants_[i]);  // most recently hit first
    Variant& v = *variants_[0];
    ++counters().cache_hits;
    if (v.breaks()) {
      if (options_.fullgraph) return raise_graph_break(*v.trace().graph_break);
      return call_eagerly(args, kwargs);
    }
    return v.run(inputs);
  }

  // A miss: retrace, unless the function has been retraced too often.
  std::string failing_guard;
  if (!variants_.empty()) {
    vm::GuardFailure why;
    variants_[0]->guards_hold(inputs, &why);
    failing_guard = vm::to_string(why);
    ++counters().recompiles;
    if (log_enabled("recompiles")) {
      std::fprintf(stderr, "dynvm: recompiling %s: %s\n", function_name(function_.get()).c_str(),
                   failing_guard.c_str());
    }
    if (static_cast<int>(variants_.size()) >= options_.cache_size_limit) {
      PyRef message = PyRef::steal(PyUnicode_FromFormat(
          "dynvm: %s was recompiled %d times (cache_size_limit); it runs eagerly from now "
          "on. The guard that kept failing: %s",
          function_name(function_.get()).c_str(), options_.cache_size_limit,
          failing_guard.c_str()));
      if (PyErr_WarnEx(PyExc_RuntimeWarning, PyUnicode_AsUTF8(message.get()), 1) < 0) {
        return nullptr;
      }
      gave_up_ = true;
      return call_eagerly(args, kwargs);
    }
  }
  vm::Trace trace = vm::trace_function(function_.get(), locals);
  if (trace.graph_break) {
    ++counters().graph_breaks;
    if (log_enabled("breaks")) {
      std::fprintf(stderr, "dynvm: graph break in %s: %s (at %s:%d)\n",
                   function_name(function_.get()).c_str(), trace.graph_break->reason.c_str(),
                   trace.graph_break->filename.c_str(), trace.graph_break->lineno);
    }
    if (options_.fullgraph) return raise_graph_break(*trace.graph_break);
  } else {
    ++counters().frames_traced;
    if (log_enabled("graph")) {
      std::fprintf(stderr, "dynvm: graph of %s\n%s\n", function_name(function_.get()).c_str(),
                   graph::to_text(trace.graph).c_str());
    }
    if (log_enabled("guards")) {
      std::fprintf(stderr, "dynvm: guards of %s\n%s", function_name(function_.get()).c_str(),
                   trace.guards.to_string().c_str());
    }
  }
  auto variant = Variant::build(std::move(trace));
  if (!variant) {
    // The backend cannot run this graph: this path runs eagerly.
    vm::Trace broken;
    broken.graph_break = vm::GraphBreakInfo{variant.error().message, "", 0};
    ++counters().graph_breaks;
    if (options_.fullgraph) return raise_graph_break(*broken.graph_break);
    return call_eagerly(args, kwargs);
  }
  variants_.insert(variants_.begin(), std::move(variant).value());
  Variant& v = *variants_[0];
  if (v.breaks()) return call_eagerly(args, kwargs);
  return v.run(inputs);
}

bool CompiledFunction::explain(PyObject* args, PyObject* kwargs, Explanation* out) {
  std::vector<PyRef> bound;
  if (!bind_arguments(function_.get(), args, kwargs, &bound)) {
    PyErr_SetString(PyExc_TypeError, "dynvm.explain: the arguments do not match the function");
    return false;
  }
  std::vector<PyObject*> locals;
  for (const PyRef& r : bound) locals.push_back(r.get());
  vm::Trace trace = vm::trace_function(function_.get(), locals);
  if (trace.graph_break) {
    out->breaks.push_back(*trace.graph_break);
  } else {
    out->graphs.push_back(graph::to_text(trace.graph));
    out->ops_per_graph.push_back(trace.graph.num_nodes());
  }
  out->guards = trace.guards.lines();
  return true;
}

}  // namespace dynvm::runtime
