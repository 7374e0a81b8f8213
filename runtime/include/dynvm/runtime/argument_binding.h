// bind_arguments: CPython's binding of a call's arguments to a function's parameters,
// done in C++ so a compiled call can check guards without creating a frame.
#pragma once

#include <Python.h>

#include <vector>

#include "dynvm/support/py_ref.h"

namespace dynvm::runtime {

// Fills `out` with one reference per parameter of `function` (a PyFunctionObject,
// borrowed), in localsplus order: positional, keyword-only, *args tuple, **kwargs dict —
// defaults applied. Returns false, with no Python error set, when the call does not
// bind (wrong count, unknown or duplicate keyword): calling the function then raises
// CPython's own TypeError.
bool bind_arguments(PyObject* function, PyObject* args, PyObject* kwargs, std::vector<PyRef>* out);

}  // namespace dynvm::runtime
