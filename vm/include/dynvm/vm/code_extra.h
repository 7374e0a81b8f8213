// code_extra: a C++ object kept on a code object (its co_extra slots, PEP 523), created
// on first use and deleted with the code object. One slot per type T. Here in the VM, the
// lowest layer that knows live code objects, so that the VM's caches and the runtime's
// share it.
#pragma once

#include <Python.h>

namespace dynvm::vm {

template <typename T>
class CodeExtra {
 public:
  // The T kept on `code` (borrowed), made now when there is none and `create`; nullptr
  // when there is none or CPython has no slot left (no Python error is left set).
  static T* get(PyObject* code, bool create) {
    Py_ssize_t slot = index();
    if (slot < 0) return nullptr;
    void* extra = nullptr;
#if PY_VERSION_HEX >= 0x030C0000
    int rc = PyUnstable_Code_GetExtra(code, slot, &extra);
#else
    int rc = _PyCode_GetExtra(code, slot, &extra);
#endif
    if (rc < 0) {
      PyErr_Clear();
      return nullptr;
    }
    if (extra != nullptr || !create) return static_cast<T*>(extra);
    T* fresh = new T();
#if PY_VERSION_HEX >= 0x030C0000
    rc = PyUnstable_Code_SetExtra(code, slot, fresh);
#else
    rc = _PyCode_SetExtra(code, slot, fresh);
#endif
    if (rc < 0) {
      PyErr_Clear();
      delete fresh;
      return nullptr;
    }
    return fresh;
  }

 private:
  static Py_ssize_t index() {
    static const Py_ssize_t slot = [] {
      auto free_extra = [](void* p) { delete static_cast<T*>(p); };
#if PY_VERSION_HEX >= 0x030C0000
      return PyUnstable_Eval_RequestCodeExtraIndex(free_extra);
#else
      return _PyEval_RequestCodeExtraIndex(free_extra);
#endif
    }();
    return slot;
  }
};

}  // namespace dynvm::vm
