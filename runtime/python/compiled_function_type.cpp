// dynvm._C.CompiledFunction: the Python type around runtime::CompiledFunction.
#include "compiled_function_type.h"

#include <new>
#include <string>

#include "dynvm/runtime/compiled_function.h"

namespace dynvm::runtime {

namespace {

struct CompiledFunctionObject {
  PyObject_HEAD CompiledFunction* impl;  // owned
};

PyObject* compiled_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"function",         "backend", "fullgraph",
                                    "cache_size_limit", "mode",    nullptr};
  PyObject* function = nullptr;
  const char* backend = "eager";
  int fullgraph = 0;
  int cache_size_limit = 8;
  const char* mode = "default";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|spis", const_cast<char**>(kKeywords), &function,
                                   &backend, &fullgraph, &cache_size_limit, &mode)) {
    return nullptr;
  }
  if (!valid_mode(mode)) return nullptr;
  if (cache_size_limit < 1) {
    PyErr_SetString(PyExc_ValueError, "cache_size_limit must be at least 1");
    return nullptr;
  }
  if (!PyFunction_Check(function)) {
    PyErr_SetString(PyExc_TypeError, "dynvm._C.CompiledFunction needs a Python function");
    return nullptr;
  }
  auto* self = reinterpret_cast<CompiledFunctionObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  CompileOptions options;
  options.backend = backend;
  options.mode = mode;
  options.fullgraph = fullgraph != 0;
  options.cache_size_limit = cache_size_limit;
  self->impl = new (std::nothrow) CompiledFunction(function, options);
  if (self->impl == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return reinterpret_cast<PyObject*>(self);
}

void compiled_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  delete reinterpret_cast<CompiledFunctionObject*>(self)->impl;
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
}

PyObject* compiled_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  return reinterpret_cast<CompiledFunctionObject*>(self)->impl->call(args, kwargs);
}

PyObject* string_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  for (size_t i = 0; list != nullptr && i < items.size(); ++i) {
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), PyUnicode_FromString(items[i].c_str()));
  }
  return list;
}

// explain(args, kwargs) -> dict(graphs=[str], ops_per_graph=[int], breaks=[(reason, file,
// line)], guards=[str], cuda_graphs=[str]: under mode="reduce-overhead", per graph, whether it
// replays as a CUDA graph or why not)
PyObject* compiled_explain(PyObject* self, PyObject* args) {
  PyObject* call_args = nullptr;
  PyObject* call_kwargs = nullptr;
  if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &call_args, &call_kwargs)) return nullptr;
  if (call_kwargs == Py_None) call_kwargs = nullptr;
  Explanation e;
  if (!reinterpret_cast<CompiledFunctionObject*>(self)->impl->explain(call_args, call_kwargs, &e)) {
    return nullptr;
  }
  PyObject* breaks = PyList_New(0);
  for (const auto& b : e.breaks) {
    PyObject* item = Py_BuildValue("(ssi)", b.reason.c_str(), b.filename.c_str(), b.lineno);
    PyList_Append(breaks, item);
    Py_DECREF(item);
  }
  PyObject* ops = PyList_New(0);
  for (size_t n : e.ops_per_graph) {
    PyObject* item = PyLong_FromSize_t(n);
    PyList_Append(ops, item);
    Py_DECREF(item);
  }
  return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N}", "graphs", string_list(e.graphs), "ops_per_graph",
                       ops, "breaks", breaks, "guards", string_list(e.guards), "cuda_graphs",
                       string_list(e.cuda_graphs));
}

PyMethodDef kCompiledMethods[] = {
    {"explain", compiled_explain, METH_VARARGS,
     "explain(args, kwargs): trace one call and describe its graphs, breaks and guards."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot kCompiledSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(compiled_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(compiled_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(compiled_call)},
    {Py_tp_methods, kCompiledMethods},
    {Py_tp_doc,
     const_cast<char*>("A function compiled by dynvm: guarded variants traced from its bytecode.")},
    {0, nullptr}};

PyType_Spec kCompiledSpec = {"dynvm._C.CompiledFunction",
                             static_cast<int>(sizeof(CompiledFunctionObject)), 0,
                             Py_TPFLAGS_DEFAULT, kCompiledSlots};

}  // namespace

bool add_compiled_function_type(PyObject* module) {
  PyObject* type = PyType_FromSpec(&kCompiledSpec);  // new reference
  if (type == nullptr) return false;
  if (PyModule_AddObject(module, "CompiledFunction", type) < 0) {  // steals on success
    Py_DECREF(type);
    return false;
  }
  return true;
}

}  // namespace dynvm::runtime
