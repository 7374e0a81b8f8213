// The C API of include/dynvm/dynvm.h: version, enabling dynvm, and translating a
// function (live or from marshal data) with abstract inputs into graph text and guards.
#include "dynvm/dynvm.h"

#include <Python.h>
#include <marshal.h>

#include <string>
#include <vector>

#include "dynvm/graph/graph_parser.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/version.h"
#include "dynvm/vm/trace.h"

struct dynvm_translation {
  std::string graph;
  std::string guards;
  std::string error;
  bool failed = false;
};

namespace {

using dynvm::PyRef;

std::vector<std::string> split_inputs(const char* inputs) {
  std::vector<std::string> out;
  std::string all = inputs == nullptr ? "" : inputs;
  size_t start = 0;
  while (start <= all.size()) {
    size_t semi = all.find(';', start);
    std::string part =
        all.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
    size_t a = part.find_first_not_of(" \t\n");
    size_t b = part.find_last_not_of(" \t\n");
    if (a != std::string::npos) out.push_back(part.substr(a, b - a + 1));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  return out;
}

// A tensor for a graph-text type ("f32[2, 3] cpu grad"), filled with zeros; or, when the
// description is not a tensor type, the value of a Python expression. New reference.
PyObject* make_input(const std::string& description) {
  auto parse = [](const std::string& type) {
    return dynvm::graph::parse_graph("graph(%a: " + type + "):\n  return (%a)\n");
  };
  auto parsed = parse(description);
  if (!parsed) parsed = parse(description + " cpu");  // the device may be left out
  if (parsed && parsed.value().inputs()[0]->meta() != nullptr) {
    const dynvm::graph::TensorMeta& meta = *parsed.value().inputs()[0]->meta();
    PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
    if (!torch) return nullptr;
    PyRef sizes = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(meta.sizes.size())));
    for (size_t i = 0; i < meta.sizes.size(); ++i) {
      PyTuple_SET_ITEM(sizes.get(), static_cast<Py_ssize_t>(i), PyLong_FromLongLong(meta.sizes[i]));
    }
    PyRef dtype = PyRef::steal(PyObject_GetAttrString(
        torch.get(), std::string(dynvm::graph::dtype_name(meta.dtype)).c_str()));
    PyRef device = PyRef::steal(PyUnicode_FromString(dynvm::graph::to_string(meta.device).c_str()));
    PyRef zeros = PyRef::steal(PyObject_GetAttrString(torch.get(), "zeros"));
    PyRef args = PyRef::steal(PyTuple_Pack(1, sizes.get()));
    PyRef kwargs =
        PyRef::steal(Py_BuildValue("{s:O,s:O,s:O}", "dtype", dtype.get(), "device", device.get(),
                                   "requires_grad", meta.requires_grad ? Py_True : Py_False));
    if (!dtype || !zeros || !args || !kwargs) return nullptr;
    return PyObject_Call(zeros.get(), args.get(), kwargs.get());
  }
  PyRef globals = PyRef::steal(PyDict_New());
  PyDict_SetItemString(globals.get(), "__builtins__", PyEval_GetBuiltins());
  return PyRun_String(description.c_str(), Py_eval_input, globals.get(), globals.get());
}

dynvm_translation* translate(PyObject* function, const char* inputs) {
  if (!PyFunction_Check(function)) {
    PyErr_SetString(PyExc_TypeError, "dynvm_translate_function: not a Python function");
    return nullptr;
  }
  std::vector<PyRef> values;
  for (const std::string& description : split_inputs(inputs)) {
    PyObject* value = make_input(description);
    if (value == nullptr) return nullptr;
    values.push_back(PyRef::steal(value));
  }
  auto* code =
      reinterpret_cast<PyCodeObject*>(reinterpret_cast<PyFunctionObject*>(function)->func_code);
  if (static_cast<int>(values.size()) != code->co_argcount || code->co_kwonlyargcount != 0 ||
      (code->co_flags & (CO_VARARGS | CO_VARKEYWORDS))) {
    PyErr_Format(PyExc_TypeError,
                 "dynvm_translate_function: %s takes %d positional parameters, %zu inputs given",
                 PyUnicode_AsUTF8(code->co_name), code->co_argcount, values.size());
    return nullptr;
  }
  std::vector<PyObject*> arguments;
  for (const PyRef& v : values) arguments.push_back(v.get());
  dynvm::vm::Trace trace = dynvm::vm::trace_function(function, arguments);
  auto* t = new dynvm_translation();
  t->guards = trace.guards.to_string();
  if (trace.graph_break) {
    t->failed = true;
    t->error = trace.graph_break->reason + " (at " + trace.graph_break->filename + ":" +
               std::to_string(trace.graph_break->lineno) + ")";
  } else {
    t->graph = dynvm::graph::to_text(trace.graph);
  }
  return t;
}

}  // namespace

extern "C" const char* dynvm_version(void) { return DYNVM_VERSION_STRING; }

extern "C" int dynvm_enable(void) {
  for (const char* name : {"torch", "dynvm", "dynvm._tracing"}) {
    PyObject* module = PyImport_ImportModule(name);  // new reference
    if (module == nullptr) return -1;
    Py_DECREF(module);
  }
  return 0;
}

extern "C" dynvm_translation* dynvm_translate_function(struct _object* function,
                                                       const char* inputs) {
  return translate(function, inputs);
}

extern "C" dynvm_translation* dynvm_translate_marshal(const char* data, size_t size,
                                                      const char* name, const char* inputs) {
  PyRef code = PyRef::steal(PyMarshal_ReadObjectFromString(data, static_cast<Py_ssize_t>(size)));
  if (!code) return nullptr;
  if (!PyCode_Check(code.get())) {
    PyErr_SetString(PyExc_TypeError, "dynvm_translate_marshal: the data is not a code object");
    return nullptr;
  }
  PyRef globals = PyRef::steal(PyDict_New());
  PyDict_SetItemString(globals.get(), "__builtins__", PyEval_GetBuiltins());
  PyDict_SetItemString(globals.get(), "__name__",
                       PyRef::steal(PyUnicode_FromString("__dynvm_translated__")).get());
  PyRef result = PyRef::steal(PyEval_EvalCode(code.get(), globals.get(), globals.get()));
  if (!result) return nullptr;
  PyObject* function = PyDict_GetItemString(globals.get(), name);  // borrowed
  if (function == nullptr) {
    PyErr_Format(PyExc_KeyError, "dynvm_translate_marshal: the code defines no '%s'", name);
    return nullptr;
  }
  return translate(function, inputs);
}

extern "C" const char* dynvm_translation_graph(const dynvm_translation* t) {
  return t->graph.c_str();
}
extern "C" const char* dynvm_translation_guards(const dynvm_translation* t) {
  return t->guards.c_str();
}
extern "C" const char* dynvm_translation_error(const dynvm_translation* t) {
  return t->failed ? t->error.c_str() : nullptr;
}
extern "C" void dynvm_translation_free(dynvm_translation* t) { delete t; }
