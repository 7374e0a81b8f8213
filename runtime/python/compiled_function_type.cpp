// dynvm._C.CompiledFunction: the Python type around runtime::CompiledFunction.
#include "compiled_function_type.h"

#include <structmember.h>

#include <array>
#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "dynvm/runtime/compiled_function.h"
#include "dynvm/support/py_ref.h"

namespace dynvm::runtime {

namespace {

struct CompiledFunctionObject {
  PyObject_HEAD vectorcallfunc vectorcall;  // compiled_vectorcall: calls skip argument tuples
  CompiledFunction* impl;                   // owned
  PyObject* bound;  // owned or null: the object every call passes first (a method's self)
};

// Calls the function with `bound` first. The caller's spare slot before the arguments is
// used where it offers one (PY_VECTORCALL_ARGUMENTS_OFFSET), as CPython's bound methods do.
PyObject* call_with_bound(CompiledFunctionObject* self, PyObject* const* args, size_t nargsf,
                          PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if ((nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) != 0) {
    auto** slot = const_cast<PyObject**>(args) - 1;
    PyObject* saved = *slot;
    *slot = self->bound;
    PyObject* result = self->impl->call_vector(slot, static_cast<size_t>(nargs + 1), kwnames);
    *slot = saved;
    return result;
  }
  const Py_ssize_t total = nargs + (kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0);
  constexpr Py_ssize_t kSmall = 8;
  std::array<PyObject*, kSmall + 1> small{};
  std::vector<PyObject*> large;
  PyObject** stack = small.data();
  if (total + 1 > kSmall + 1) {
    large.resize(static_cast<size_t>(total + 1));
    stack = large.data();
  }
  stack[0] = self->bound;
  for (Py_ssize_t i = 0; i < total; ++i) stack[i + 1] = args[i];
  return self->impl->call_vector(stack, static_cast<size_t>(nargs + 1), kwnames);
}

PyObject* compiled_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                              PyObject* kwnames) {
  auto* self = reinterpret_cast<CompiledFunctionObject*>(callable);
  if (self->bound != nullptr) return call_with_bound(self, args, nargsf, kwnames);
  return self->impl->call_vector(args, nargsf, kwnames);
}

PyObject* compiled_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"function", "backend", "fullgraph", "cache_size_limit",
                                    "mode",     "bound",   "dynamic",   nullptr};
  PyObject* function = nullptr;
  const char* backend = "eager";
  int fullgraph = 0;
  int cache_size_limit = 8;
  const char* mode = "default";
  PyObject* bound = nullptr;
  int dynamic = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|spis$Oi", const_cast<char**>(kKeywords),
                                   &function, &backend, &fullgraph, &cache_size_limit, &mode,
                                   &bound, &dynamic)) {
    return nullptr;
  }
  if (dynamic < -1 || dynamic > 1) {
    PyErr_SetString(PyExc_ValueError, "dynamic must be -1 (None), 0 (False) or 1 (True)");
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
  self->vectorcall = compiled_vectorcall;
  self->bound = bound != nullptr && bound != Py_None ? Py_NewRef(bound) : nullptr;
  CompileOptions options;
  options.backend = backend;
  options.mode = mode;
  options.fullgraph = fullgraph != 0;
  options.cache_size_limit = cache_size_limit;
  options.dynamic = dynamic;
  self->impl = new (std::nothrow) CompiledFunction(function, options);
  if (self->impl == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return reinterpret_cast<PyObject*>(self);
}

void compiled_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  auto* object = reinterpret_cast<CompiledFunctionObject*>(self);
  delete object->impl;
  Py_CLEAR(object->bound);
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
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
  auto* object = reinterpret_cast<CompiledFunctionObject*>(self);
  PyRef with_bound;
  if (object->bound != nullptr) {  // the bound object first, as a call passes it
    const Py_ssize_t n = PyTuple_GET_SIZE(call_args);
    with_bound = PyRef::steal(PyTuple_New(n + 1));
    if (!with_bound) return nullptr;
    PyTuple_SET_ITEM(with_bound.get(), 0, Py_NewRef(object->bound));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyTuple_SET_ITEM(with_bound.get(), i + 1, Py_NewRef(PyTuple_GET_ITEM(call_args, i)));
    }
    call_args = with_bound.get();
  }
  Explanation e;
  if (!object->impl->explain(call_args, call_kwargs, &e)) return nullptr;
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

PyMemberDef kCompiledMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET,
     static_cast<Py_ssize_t>(offsetof(CompiledFunctionObject, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot kCompiledSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(compiled_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(compiled_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_methods, kCompiledMethods},
    {Py_tp_members, kCompiledMembers},
    {Py_tp_doc,
     const_cast<char*>("A function compiled by dynvm: guarded variants traced from its bytecode.")},
    {0, nullptr}};

PyType_Spec kCompiledSpec = {"dynvm._C.CompiledFunction",
                             static_cast<int>(sizeof(CompiledFunctionObject)), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, kCompiledSlots};

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
