// dynvm._C.wrapper_call: the __call__ of the objects dynvm.compile returns.
#pragma once

#include <Python.h>

namespace dynvm::runtime {

// Adds `wrapper_call` and `configure_wrapper_call` to the module; false with a Python error
// set on failure.
bool add_wrapper_call(PyObject* module);

}  // namespace dynvm::runtime
