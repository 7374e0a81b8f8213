// CompiledFunction: guard checks, tracing on a miss, recompiles, breaks and logging.
#include "dynvm/runtime/compiled_function.h"

#include "dynvm/support/log_topics.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "dynvm/graph/graph_printer.h"
#include "dynvm/runtime/argument_binding.h"
#include "dynvm/runtime/frame_driver.h"
#include "dynvm/runtime/frame_hook.h"
#include "dynvm/runtime/run_report.h"

namespace dynvm::runtime {

namespace {

uint64_t g_epoch = 1;
PyObject* g_graph_break_error = nullptr;  // owned; set once by the module

}  // namespace

bool log_enabled(const char* what) { return log_topic_enabled(what); }

bool valid_mode(const char* mode) {
  if (std::strcmp(mode, "default") == 0 || std::strcmp(mode, "reduce-overhead") == 0 ||
      std::strcmp(mode, "max-autotune") == 0) {
    return true;
  }
  PyErr_Format(PyExc_ValueError, "dynvm: mode %R is not implemented by this runtime", mode);
  return false;
}

Counters& counters() {
  static Counters c;
  return c;
}

RunReport& run_report() {
  static RunReport r;
  return r;
}

void reset_all() {
  counters() = Counters{};
  run_report() = RunReport{};
  ++g_epoch;
}

uint64_t current_epoch() { return g_epoch; }

void set_graph_break_error(const std::string& where, const vm::GraphBreakInfo& info) {
  std::string message = "dynvm: graph break in " + where + ": " + info.reason + " (at " +
                        info.filename + ":" + std::to_string(info.lineno) +
                        "); fullgraph=True forbids breaks";
  PyErr_SetString(g_graph_break_error ? g_graph_break_error : PyExc_RuntimeError, message.c_str());
}

void set_graph_break_error_type(PyObject* type) {
  Py_XINCREF(type);
  Py_XSETREF(g_graph_break_error, type);
}

CompiledFunction::CompiledFunction(PyObject* function, CompileOptions options)
    : function_(PyRef::borrow(function)), options_(std::move(options)) {}

CompiledFunction::~CompiledFunction() = default;

PyObject* CompiledFunction::call(PyObject* args, PyObject* kwargs) {
  PyObject* code = reinterpret_cast<PyFunctionObject*>(function_.get())->func_code;
  CompileScope scope(options_, code);
  return PyObject_Call(function_.get(), args, kwargs);
}

PyObject* CompiledFunction::call_vector(PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject* code = reinterpret_cast<PyFunctionObject*>(function_.get())->func_code;
  CompileScope scope(options_, code);
  return PyObject_Vectorcall(function_.get(), args, nargsf, kwnames);
}

bool CompiledFunction::explain(PyObject* args, PyObject* kwargs, Explanation* out) {
  std::vector<PyRef> bound;
  if (!bind_arguments(function_.get(), args, kwargs, &bound)) {
    PyErr_SetString(PyExc_TypeError, "dynvm.explain: the arguments do not match the function");
    return false;
  }
  // The call runs, so that what follows each break is traced from the real values there.
  ExplainRecorder recorder(out);
  PyObject* code = reinterpret_cast<PyFunctionObject*>(function_.get())->func_code;
  CompileScope scope(options_, code);
  PyRef result = PyRef::steal(PyObject_Call(function_.get(), args, kwargs));
  return static_cast<bool>(result);
}

}  // namespace dynvm::runtime
