// The live-code adapter: a PyCodeObject of the running interpreter to RawCode.
//
// Part of the dynvm_frontend_cpython target, the only frontend code that links
// CPython; this header itself needs no Python.h.
#pragma once

#include "dynvm/frontend/raw_code.h"
#include "dynvm/support/expected.h"

// CPython's code object type (typedef'd to the same struct by Python.h).
struct PyCodeObject;

namespace dynvm::frontend {

// Copies the fields of `code` into a RawCode, converting co_consts recursively (nested
// code objects too); the result holds no Python objects and outlives `code`.
//
// `code` is borrowed: the caller holds the GIL and keeps `code` alive during the call.
// co_code is the deoptimized bytecode (PyCode_GetCode): the base instructions with
// zeroed caches, as marshal writes it. A constant of a type that code objects do not
// hold gives an Error, and so does bytecode that ends inside an instruction's inline caches
// (which CPython's co_code getter would write past: CodeType.replace() makes such code);
// no Python exception is left set either way. Frozenset elements
// come in the live set's iteration order.
Expected<RawCodePtr> raw_code_from_live(PyCodeObject* code);

}  // namespace dynvm::frontend
