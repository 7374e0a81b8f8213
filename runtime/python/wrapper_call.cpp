// dynvm._C.wrapper_call: the __call__ of the objects dynvm.compile returns.
//
// A wrapper class (dynvm.wrappers.CompiledFunction, the compiled nn.Module) has this one
// object as its class attribute `__call__`. It is a method descriptor, so CPython calls it
// with the wrapper first and builds no bound method, and it calls the wrapper's native
// dynvm._C.CompiledFunction straight away: a cache hit runs no Python frame of dynvm's own.
// What it reads, in the wrapper's __dict__:
//   _dynvm_native  the native object to call; absent until it has been made, which the
//                  class's `_dynvm_make_native(wrapper)` does where the class has one (so
//                  that a first call, too, runs no frame of dynvm's own below the traced
//                  function: warn's stacklevel and sys._getframe see the caller's frames);
//   _dynvm_idle    optional: names of the wrapper's attributes that must be absent, None or
//                  empty for the call to skip the class's own __call__ (a module's hooks).
//                  Where it is given, the containers configure_wrapper_call named (torch's
//                  global module hooks) must be empty too, and its tracing-state function
//                  must return None.
// Any other call goes to type(wrapper)._dynvm_slow_call(wrapper, *args, **kwargs), which is
// what __call__ would have been in Python (nn.Module.__call__ for a module).
#include "wrapper_call.h"

#include <structmember.h>

#include <cstddef>
#include <string>
#include <vector>

#include "dynvm/support/py_ref.h"
#include "dynvm/vm/guard.h"

namespace dynvm::runtime {

namespace {

struct WrapperCallObject {
  PyObject_HEAD vectorcallfunc vectorcall;
};

struct IdleGlobals {
  PyObject* namespace_dict = nullptr;  // owned: the dict holding the global containers
  PyObject* names = nullptr;           // owned tuple of str
  PyObject* tracing_state = nullptr;   // owned or null: called, must return None
};

IdleGlobals g_idle_globals;
PyObject* g_native_key = nullptr;  // interned "_dynvm_native"
PyObject* g_idle_key = nullptr;    // interned "_dynvm_idle"
PyObject* g_slow_key = nullptr;    // interned "_dynvm_slow_call"
PyObject* g_make_key = nullptr;    // interned "_dynvm_make_native"

// An attribute value that leaves the call as the class's own __call__ would make it: None,
// or a container with nothing in it.
bool is_idle(PyObject* value) {
  if (value == Py_None) return true;
  if (PyDict_Check(value)) return PyDict_GET_SIZE(value) == 0;
  const Py_ssize_t n = PyObject_Length(value);
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  return n == 0;
}

// Every name in `names` is absent from `dict`, or idle there.
bool all_idle(PyObject* dict, PyObject* names) {
  if (!PyTuple_Check(names)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* value = PyDict_GetItemWithError(dict, PyTuple_GET_ITEM(names, i));  // borrowed
    if (value == nullptr) {
      if (PyErr_Occurred() != nullptr) {
        PyErr_Clear();
        return false;
      }
      continue;
    }
    if (!is_idle(value)) return false;
  }
  return true;
}

// Whether the wrapper whose __dict__ is `dict` may call its native object directly.
bool may_skip_class_call(PyObject* dict) {
  PyObject* names = PyDict_GetItemWithError(dict, g_idle_key);  // borrowed
  if (names == nullptr) {
    if (PyErr_Occurred() == nullptr) return true;
    PyErr_Clear();
    return false;
  }
  if (!all_idle(dict, names)) return false;
  if (g_idle_globals.namespace_dict != nullptr &&
      !all_idle(g_idle_globals.namespace_dict, g_idle_globals.names)) {
    return false;
  }
  if (g_idle_globals.tracing_state != nullptr) {
    PyRef state = PyRef::steal(PyObject_CallNoArgs(g_idle_globals.tracing_state));
    if (!state) {
      PyErr_Clear();
      return false;
    }
    if (state.get() != Py_None) return false;
  }
  return true;
}

PyObject* slow_call(PyObject* wrapper, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyRef slow =
      PyRef::steal(PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(wrapper)), g_slow_key));
  if (!slow) return nullptr;
  return PyObject_Vectorcall(slow.get(), args, nargsf, kwnames);
}

PyObject* wrapper_vectorcall(PyObject* /*callable*/, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError,
                    "dynvm._C.wrapper_call needs the wrapper as its first "
                    "argument (it is a class's __call__)");
    return nullptr;
  }
  PyObject* wrapper = args[0];
  PyRef dict = PyRef::steal(PyObject_GenericGetDict(wrapper, nullptr));
  if (!dict) return nullptr;
  PyObject* native = PyDict_GetItemWithError(dict.get(), g_native_key);  // borrowed
  if (native == nullptr && PyErr_Occurred() != nullptr) return nullptr;
  if (native == nullptr) {
    PyRef make =
        PyRef::steal(PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(wrapper)), g_make_key));
    if (make) {
      PyRef made = PyRef::steal(PyObject_CallOneArg(make.get(), wrapper));
      if (!made) return nullptr;
      native = PyDict_GetItemWithError(dict.get(), g_native_key);  // borrowed
      if (native == nullptr && PyErr_Occurred() != nullptr) return nullptr;
    } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();  // a class that makes its native object in its slow call
    } else {
      return nullptr;
    }
  }
  if (native != nullptr && may_skip_class_call(dict.get())) {
    PyRef keep = PyRef::borrow(native);  // the call may replace the wrapper's attribute
    // args[0] (the wrapper) is the spare slot before the native object's arguments.
    return PyObject_Vectorcall(keep.get(), args + 1,
                               static_cast<size_t>(nargs - 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                               kwnames);
  }
  return slow_call(wrapper, args, nargsf, kwnames);
}

PyObject* wrapper_descr_get(PyObject* self, PyObject* instance, PyObject* /*owner*/) {
  if (instance == nullptr || instance == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, instance);
}

PyMemberDef kWrapperCallMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET,
     static_cast<Py_ssize_t>(offsetof(WrapperCallObject, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot kWrapperCallSlots[] = {
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(wrapper_descr_get)},
    {Py_tp_members, kWrapperCallMembers},
    {Py_tp_doc, const_cast<char*>("The __call__ of dynvm.compile's wrappers: calls the wrapper's "
                                  "native compiled function with no Python frame between.")},
    {0, nullptr}};

PyType_Spec kWrapperCallSpec = {
    "dynvm._C.WrapperCall", static_cast<int>(sizeof(WrapperCallObject)), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    kWrapperCallSlots};

// configure_wrapper_call(namespace, names, tracing_state): the global containers (names in
// the dict `namespace`) that must be empty, and the function that must return None, for a
// wrapper with _dynvm_idle to skip its class's __call__. Either may be None.
PyObject* configure_wrapper_call(PyObject* /*module*/, PyObject* args) {
  PyObject* namespace_dict = nullptr;
  PyObject* names = nullptr;
  PyObject* tracing_state = nullptr;
  if (!PyArg_ParseTuple(args, "OOO", &namespace_dict, &names, &tracing_state)) return nullptr;
  if (namespace_dict != Py_None && !PyDict_Check(namespace_dict)) {
    PyErr_SetString(PyExc_TypeError, "configure_wrapper_call: namespace must be a dict or None");
    return nullptr;
  }
  if (names != Py_None && !PyTuple_Check(names)) {
    PyErr_SetString(PyExc_TypeError, "configure_wrapper_call: names must be a tuple or None");
    return nullptr;
  }
  if (tracing_state != Py_None && PyCallable_Check(tracing_state) == 0) {
    PyErr_SetString(PyExc_TypeError,
                    "configure_wrapper_call: tracing_state must be callable or None");
    return nullptr;
  }
  const bool has_namespace = namespace_dict != Py_None && names != Py_None;
  Py_XSETREF(g_idle_globals.namespace_dict, has_namespace ? Py_NewRef(namespace_dict) : nullptr);
  Py_XSETREF(g_idle_globals.names, has_namespace ? Py_NewRef(names) : nullptr);
  Py_XSETREF(g_idle_globals.tracing_state,
             tracing_state != Py_None ? Py_NewRef(tracing_state) : nullptr);
  Py_RETURN_NONE;
}

// hook_names(): (the hook dicts a module may carry, torch's global hook dicts), as tuples
// of str: the names the guards read (vm/guard.h), for the wrappers' idle check.
PyObject* hook_names(PyObject* /*module*/, PyObject* /*args*/) {
  auto as_tuple = [](const std::vector<std::string>& names) -> PyObject* {
    PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(names.size()));
    if (tuple == nullptr) return nullptr;
    for (size_t i = 0; i < names.size(); ++i) {
      PyObject* name = PyUnicode_FromString(names[i].c_str());
      if (name == nullptr) {
        Py_DECREF(tuple);
        return nullptr;
      }
      PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), name);
    }
    return tuple;
  };
  PyRef per_module = PyRef::steal(as_tuple(vm::module_hook_names()));
  PyRef global = PyRef::steal(as_tuple(vm::global_module_hook_names()));
  if (!per_module || !global) return nullptr;
  return PyTuple_Pack(2, per_module.get(), global.get());
}

PyMethodDef kWrapperCallMethods[] = {
    {"hook_names", hook_names, METH_NOARGS,
     "hook_names(): (a module's hook dict names, torch's global hook dict names)."},
    {"configure_wrapper_call", configure_wrapper_call, METH_VARARGS,
     "configure_wrapper_call(namespace, names, tracing_state): what must be idle for a "
     "module wrapper's call to skip its class's __call__."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

bool add_wrapper_call(PyObject* module) {
  g_native_key = PyUnicode_InternFromString("_dynvm_native");
  g_idle_key = PyUnicode_InternFromString("_dynvm_idle");
  g_slow_key = PyUnicode_InternFromString("_dynvm_slow_call");
  g_make_key = PyUnicode_InternFromString("_dynvm_make_native");
  if (g_native_key == nullptr || g_idle_key == nullptr || g_slow_key == nullptr ||
      g_make_key == nullptr) {
    return false;
  }
  PyRef type = PyRef::steal(PyType_FromSpec(&kWrapperCallSpec));
  if (!type) return false;
  auto* call = reinterpret_cast<WrapperCallObject*>(
      reinterpret_cast<PyTypeObject*>(type.get())
          ->tp_alloc(reinterpret_cast<PyTypeObject*>(type.get()), 0));
  if (call == nullptr) return false;
  call->vectorcall = wrapper_vectorcall;
  PyRef instance = PyRef::steal(reinterpret_cast<PyObject*>(call));
  return PyModule_AddObjectRef(module, "wrapper_call", instance.get()) == 0 &&
         PyModule_AddFunctions(module, kWrapperCallMethods) == 0;
}

}  // namespace dynvm::runtime
