// PyRef: an owned (strong) reference to a Python object, for layers that know CPython.
// Copying adds a reference; destruction releases it. Include only where Python.h may be.
#pragma once

#include <Python.h>

#include <utility>

namespace dynvm {

class PyRef {
 public:
  PyRef() = default;
  // Takes over `object`, a new reference (or nullptr).
  static PyRef steal(PyObject* object) { return PyRef(object); }
  // Adds a reference to `object`, a borrowed reference (or nullptr).
  static PyRef borrow(PyObject* object) {
    Py_XINCREF(object);
    return PyRef(object);
  }
  ~PyRef() { Py_XDECREF(object_); }

  PyRef(const PyRef& other) : object_(other.object_) { Py_XINCREF(object_); }
  PyRef& operator=(const PyRef& other) {
    PyRef copy(other);
    std::swap(object_, copy.object_);
    return *this;
  }
  PyRef(PyRef&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  PyRef& operator=(PyRef&& other) noexcept {
    if (this != &other) {
      Py_XDECREF(object_);
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }

  // Borrowed: valid while this PyRef holds it.
  PyObject* get() const { return object_; }
  // Gives up ownership: the caller now owns the reference.
  PyObject* release() { return std::exchange(object_, nullptr); }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  explicit PyRef(PyObject* object) : object_(object) {}
  PyObject* object_ = nullptr;
};

}  // namespace dynvm
