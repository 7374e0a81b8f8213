// The embedded interpreter of the vm_python tests and the helpers that build objects for them.
#include "python_fixture.h"

#include <Python.h>

#include <cstdio>
#include <cstdlib>

#include "catch.h"

namespace dynvm::test {

namespace {

// The text of the pending Python error, with its traceback printed to stderr; clears it.
std::string take_error() {
  if (!PyErr_Occurred()) return "";
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* value = PyErr_GetRaisedException();  // new
#else
  PyObject* type = nullptr;  // new references
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
#endif
  std::string text = "Python error";
  if (value != nullptr) {
    PyRef message = PyRef::steal(PyObject_Str(value));  // new
    if (message) text += std::string(": ") + PyUnicode_AsUTF8(message.get());
  }
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(value);  // steals
#else
  PyErr_Restore(type, value, traceback);  // steals
#endif
  PyErr_Print();
  return text;
}

}  // namespace

void ensure_python() {
  static bool started = [] {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    // Path configuration as the project's Python computes it (its site-packages hold torch).
    PyStatus status =
        PyConfig_SetBytesString(&config, &config.program_name, DYNVM_PYTHON_EXECUTABLE);
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
      std::fprintf(stderr, "cannot start Python: %s\n", status.err_msg ? status.err_msg : "?");
      std::abort();
    }
    PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));  // new
    if (!torch) {
      PyErr_Print();
      std::abort();
    }
    return true;
  }();
  (void)started;
}

PyRef run(const std::string& code) {
  ensure_python();
  PyRef ns = PyRef::steal(PyDict_New());  // new
  PyDict_SetItemString(ns.get(), "__builtins__", PyEval_GetBuiltins());
  PyDict_SetItemString(ns.get(), "__name__", PyRef::steal(PyUnicode_FromString("snippet")).get());
  PyRef result = PyRef::steal(PyRun_String(code.c_str(), Py_file_input, ns.get(), ns.get()));
  if (!result) FAIL(take_error() << "\nin:\n" << code);
  return ns;
}

void exec(const PyRef& ns, const std::string& code) {
  PyRef result = PyRef::steal(PyRun_String(code.c_str(), Py_file_input, ns.get(), ns.get()));
  if (!result) FAIL(take_error() << "\nin:\n" << code);
}

PyRef eval(const PyRef& ns, const std::string& expr) {
  PyRef result = PyRef::steal(PyRun_String(expr.c_str(), Py_eval_input, ns.get(), ns.get()));
  if (!result) FAIL(take_error() << "\nin: " << expr);
  return result;
}

PyRef get(const PyRef& ns, const std::string& name) {
  PyObject* value = PyDict_GetItemString(ns.get(), name.c_str());  // borrowed
  if (value == nullptr) FAIL("no " << name << " in the snippet's namespace");
  return PyRef::borrow(value);
}

vm::FrameInputs Call::inputs() {
  raw_locals.clear();
  for (const PyRef& local : locals) raw_locals.push_back(local.get());
  vm::FrameInputs in;
  in.locals = raw_locals.data();
  in.local_count = static_cast<int>(raw_locals.size());
  raw_stack.clear();
  for (const PyRef& entry : stack) raw_stack.push_back(entry.get());
  in.stack = raw_stack.data();
  in.stack_count = static_cast<int>(raw_stack.size());
  in.closure = closure.get();
  in.globals = globals.get();
  in.builtins = builtins.get();
  return in;
}

Call call_with_value(const PyRef& ns, const PyRef& value) {
  Call call;
  call.locals.push_back(value);
  call.globals = ns;
  call.builtins = PyRef::borrow(PyEval_GetBuiltins());
  return call;
}

Call call_with(const PyRef& ns, const std::vector<std::string>& local_names) {
  Call call;
  for (const std::string& name : local_names) {
    call.locals.push_back(PyRef::borrow(PyDict_GetItemString(ns.get(), name.c_str())));
  }
  call.globals = ns;
  call.builtins = PyRef::borrow(PyEval_GetBuiltins());
  return call;
}

bool python_error_pending() {
  if (!PyErr_Occurred()) return false;
  PyErr_Clear();
  return true;
}

}  // namespace dynvm::test
