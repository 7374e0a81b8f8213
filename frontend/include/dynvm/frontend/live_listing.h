// The `dynvm dis --json` listing of a live code object: the live-code adapter, the
// decoder and the JSON listing in one call, for the Python modules that list live code.
//
// Part of the dynvm_frontend_cpython target; this header itself needs no Python.h.
#pragma once

#include <string>

#include "dynvm/support/expected.h"

struct PyCodeObject;

namespace dynvm::frontend {

// The listing of `code` and of the code objects nested in it (borrowed; the caller holds
// the GIL). Code that cannot be read or decoded gives an Error, no Python exception.
Expected<std::string> live_dis_json(PyCodeObject* code);

}  // namespace dynvm::frontend
