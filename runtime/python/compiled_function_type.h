// The dynvm._C.CompiledFunction type.
#pragma once

#include <Python.h>

namespace dynvm::runtime {

// Adds the type to the module; false with a Python error set on failure.
bool add_compiled_function_type(PyObject* module);

}  // namespace dynvm::runtime
