// dynvm._C's functions for the frame hook and the run report (frame_hook_functions.cpp).
#pragma once

#include <Python.h>

namespace dynvm::runtime {

// Ends with a null entry, for PyModule_AddFunctions.
extern const PyMethodDef kFrameHookMethods[];

}  // namespace dynvm::runtime
