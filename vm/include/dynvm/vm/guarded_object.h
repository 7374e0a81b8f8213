// GuardedObject: an object a guard compares with by identity, held weakly where it can be,
// so that a compiled variant does not keep alive what it guards on.
#pragma once

#include <Python.h>

#include <cstddef>

#include "dynvm/support/py_ref.h"

namespace dynvm::vm {

// Variants live on their code object (co_extra), where the cycle collector cannot look: a
// strong reference from a guard to a function, module or class whose globals lead back to
// that code (code made by exec, torch.fx's generated forward) would keep both alive for
// good. An object held weakly that dies matches nothing from then on, whatever object later
// takes its address. Static types, which never die, are held strongly: their check stays one
// compare with a constant.
class GuardedObject {
 public:
  GuardedObject() = default;
  // `object` (borrowed): weakly when its type allows weak references. GIL held.
  explicit GuardedObject(PyObject* object) {
    bool static_type =
        PyType_Check(object) &&
        !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(object), Py_TPFLAGS_HEAPTYPE);
    if (!static_type && PyType_SUPPORTS_WEAKREFS(Py_TYPE(object))) {
      held_ = PyRef::steal(PyWeakref_NewRef(object, nullptr));
      if (held_) {
        weak_ = true;
        return;
      }
      PyErr_Clear();
    }
    held_ = PyRef::borrow(object);
  }

  // The object (borrowed), or nullptr once it is gone. GIL held.
  PyObject* get() const {
    if (!weak_) return held_.get();
    PyObject* object = reinterpret_cast<PyWeakReference*>(held_.get())->wr_object;
    return object == Py_None ? nullptr : object;  // CPython points a cleared weakref at None
  }

  // How compiled guards read it: when weak(), holder() is the weak reference, whose word at
  // kReferentOffset is the object, or None once it is gone; otherwise holder() is the object.
  bool weak() const { return weak_; }
  PyObject* holder() const { return held_.get(); }
  static constexpr size_t kReferentOffset = offsetof(PyWeakReference, wr_object);

 private:
  PyRef held_;  // the object, or a weak reference to it
  bool weak_ = false;
};

}  // namespace dynvm::vm
