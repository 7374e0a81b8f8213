// CPython's argument binding (Python/ceval.c's initialize_locals), in C++.
#include "dynvm/runtime/argument_binding.h"

namespace dynvm::runtime {

bool bind_arguments(PyObject* function, PyObject* args, PyObject* kwargs, std::vector<PyRef>* out) {
  auto* f = reinterpret_cast<PyFunctionObject*>(function);
  auto* code = reinterpret_cast<PyCodeObject*>(f->func_code);
  const int npos = code->co_argcount;
  const int nposonly = code->co_posonlyargcount;
  const int nkwonly = code->co_kwonlyargcount;
  const bool has_varargs = code->co_flags & CO_VARARGS;
  const bool has_varkw = code->co_flags & CO_VARKEYWORDS;
  const int total = npos + nkwonly + (has_varargs ? 1 : 0) + (has_varkw ? 1 : 0);
  PyObject* names = code->co_localsplusnames;  // borrowed tuple
  out->assign(static_cast<size_t>(total), PyRef());

  const Py_ssize_t nargs = args == nullptr ? 0 : PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < nargs && i < npos; ++i) {
    (*out)[static_cast<size_t>(i)] = PyRef::borrow(PyTuple_GET_ITEM(args, i));
  }
  int slot = npos + nkwonly;
  if (has_varargs) {
    Py_ssize_t extra = nargs > npos ? nargs - npos : 0;
    PyRef rest = PyRef::steal(args != nullptr ? PyTuple_GetSlice(args, nargs - extra, nargs)
                                              : PyTuple_New(0));
    if (!rest) {
      PyErr_Clear();
      return false;
    }
    (*out)[static_cast<size_t>(slot++)] = rest;
  } else if (nargs > npos) {
    return false;
  }
  PyRef extra_kw;
  if (has_varkw) {
    extra_kw = PyRef::steal(PyDict_New());
    (*out)[static_cast<size_t>(slot)] = extra_kw;
  }
  if (kwargs != nullptr) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {  // borrowed
      int found = -1;
      for (int i = nposonly; i < npos + nkwonly; ++i) {
        PyObject* name = PyTuple_GET_ITEM(names, i);
        if (name == key) {
          found = i;
          break;
        }
        int eq = PyObject_RichCompareBool(name, key, Py_EQ);
        if (eq < 0) {
          PyErr_Clear();
          return false;
        }
        if (eq) {
          found = i;
          break;
        }
      }
      if (found >= 0) {
        if ((*out)[static_cast<size_t>(found)]) return false;  // given twice
        (*out)[static_cast<size_t>(found)] = PyRef::borrow(value);
      } else if (extra_kw) {
        if (PyDict_SetItem(extra_kw.get(), key, value) < 0) {
          PyErr_Clear();
          return false;
        }
      } else {
        return false;
      }
    }
  }
  // Defaults for the trailing positional parameters, kwdefaults for keyword-only ones.
  PyObject* defaults = f->func_defaults;  // borrowed tuple or nullptr
  Py_ssize_t ndefaults = defaults == nullptr ? 0 : PyTuple_GET_SIZE(defaults);
  for (int i = 0; i < npos; ++i) {
    if ((*out)[static_cast<size_t>(i)]) continue;
    Py_ssize_t d = i - (npos - ndefaults);
    if (d < 0) return false;
    (*out)[static_cast<size_t>(i)] = PyRef::borrow(PyTuple_GET_ITEM(defaults, d));
  }
  for (int i = npos; i < npos + nkwonly; ++i) {
    if ((*out)[static_cast<size_t>(i)]) continue;
    PyObject* value = f->func_kwdefaults == nullptr
                          ? nullptr
                          : PyDict_GetItemWithError(f->func_kwdefaults, PyTuple_GET_ITEM(names, i));
    if (value == nullptr) {
      PyErr_Clear();
      return false;
    }
    (*out)[static_cast<size_t>(i)] = PyRef::borrow(value);
  }
  return true;
}

}  // namespace dynvm::runtime
