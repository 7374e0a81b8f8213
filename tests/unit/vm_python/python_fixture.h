// The interpreter the vm_python tests share (started once, torch imported) and helpers to
// build objects from Python snippets and describe a call's inputs.
#pragma once

#include <string>
#include <vector>

#include "dynvm/support/py_ref.h"
#include "dynvm/vm/source_resolver.h"

namespace dynvm::test {

// Starts CPython on first use (as the project's Python, so that torch is found) and imports
// torch. The main thread keeps the GIL; the interpreter is never finalized.
void ensure_python();

// Runs `code` in a new module namespace and returns that namespace (a new dict). A Python
// error fails the current test with its traceback.
PyRef run(const std::string& code);

// Runs `code` in an existing namespace (to change the objects a test built).
void exec(const PyRef& ns, const std::string& code);

// The value of the expression `expr` in namespace `ns` (a new reference).
PyRef eval(const PyRef& ns, const std::string& expr);

// namespace[name] (a new reference); fails the current test when it is missing.
PyRef get(const PyRef& ns, const std::string& name);

// One call's inputs: locals and value-stack entries (owned here; a null local is unbound),
// the closure of a function and the globals of a namespace.
struct Call {
  std::vector<PyRef> locals;
  std::vector<PyObject*> raw_locals;  // borrowed from `locals`
  std::vector<PyRef> stack;
  std::vector<PyObject*> raw_stack;  // borrowed from `stack`
  PyRef closure;
  PyRef globals;
  PyRef builtins;

  // FrameInputs over this call's objects; valid while the Call lives.
  vm::FrameInputs inputs();
};

// A call whose only local (index 0) is `value`, with ns as its globals.
Call call_with_value(const PyRef& ns, const PyRef& value);

// A call whose locals are ns[name] for each name (a missing name leaves the local unbound),
// with ns as its globals.
Call call_with(const PyRef& ns, const std::vector<std::string>& local_names);

// Whether a Python error is pending (and clears it so later tests start clean).
bool python_error_pending();

}  // namespace dynvm::test
