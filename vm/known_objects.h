// KnownObjects: the Python objects the VM recognises by identity (torch.Tensor,
// nn.Module, torch.no_grad, builtins.len, ...), looked up once per process. Private to vm/.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include "dynvm/support/py_ref.h"

namespace dynvm::vm {

struct KnownObjects {
  PyRef torch;             // the torch module
  PyRef tensor_type;       // torch.Tensor
  PyRef tensor_base_type;  // torch._C._TensorBase
  PyRef parameter_type;    // torch.nn.Parameter
  PyRef module_type;       // torch.nn.Module
  PyRef sequential_type, module_list_type, module_dict_type;
  PyRef size_type;  // torch.Size
  // torch.SymInt, torch.SymFloat, torch.SymBool: numbers over size symbols (dynamic shapes)
  PyRef sym_int_type, sym_float_type, sym_bool_type;
  // `object` (borrowed) is one of them.
  bool is_symbolic_number(PyObject* object) const {
    auto* type = reinterpret_cast<PyObject*>(Py_TYPE(object));
    return type == sym_int_type.get() || type == sym_float_type.get() ||
           type == sym_bool_type.get();
  }
  PyRef dtype_type, device_type, layout_type, memory_format_type;
  PyRef no_grad, enable_grad, set_grad_enabled, inference_mode;
  // torch.autograd.profiler.record_function (also torch.profiler.record_function): a
  // profiler range, which compiled code does not open (as under torch.compile).
  PyRef record_function;
  PyRef autocast;  // torch.autocast (torch.amp.autocast)
  PyRef is_grad_enabled;
  PyRef jit_is_scripting, jit_is_tracing;
  // torch.compiler.is_compiling and its older spellings: true in traced code, as under
  // Dynamo, so that libraries take their compile-friendly paths.
  std::vector<PyRef> is_compiling;
  PyRef is_exporting;              // torch.compiler.is_exporting: false (dynvm does not export)
  PyRef module_call;               // torch.nn.Module.__call__ (and _call_impl)
  PyRef module_getattr;            // torch.nn.Module.__getattr__
  PyRef operator_module;           // the operator module
  PyRef ordered_dict_type;         // collections.OrderedDict
  PyRef object_getattribute;       // object.__getattribute__ (a slot wrapper)
  PyRef mapping_contains;          // collections.abc.Mapping.__contains__ (try: self[key] ...)
  PyRef mapping_get;               // collections.abc.Mapping.get (likewise)
  PyRef sequence_iter;             // collections.abc.Sequence.__iter__ (self[i] until IndexError)
  PyRef inspect_signature;         // inspect.signature
  PyRef copy_copy, copy_deepcopy;  // copy.copy, copy.deepcopy
  PyRef enum_type;                 // enum.Enum
  PyRef autograd_function;         // torch.autograd.Function
  PyRef function_setup_context;    // its default setup_context (forward then takes ctx)
  PyRef autograd_function_apply;   // Function.apply's Python function, where it is one
  PyRef builtins;                  // the builtins module's dict
  PyRef tracing;                   // dynvm._tracing
  PyRef grad_mode_exit_type;       // dynvm._tracing.GradModeExit (rebuilt `with` exits)
  PyRef unchanged_exit;            // dynvm._tracing.unchanged_exit (an autocast's no-op exit)

  // Loads them on first use; false (with the Python error set) when torch is missing.
  static const KnownObjects* get();
};

// True for objects of `torch.Tensor` type or a subclass of it.
bool is_tensor(PyObject* object);  // borrowed
// True for torch.compiler.is_compiling and the other functions that tell code it is being
// compiled (torch._dynamo's included, without importing Dynamo).
bool is_compiling_flag(PyObject* fn);  // borrowed
// The namespace dict of a class. Since Python 3.12 a static builtin type (object, dict,
// the exception classes) keeps it outside tp_dict, which is then null.
PyRef type_dict(PyTypeObject* type);
// Dynamo's tagging of modules built at run time (GenerationTracker.tag, called by the
// nn.Module.__init__ Dynamo patches in once it has compiled something in the process): it
// only feeds Dynamo's own caches, and a trace skips it.
bool is_dynamo_module_tagging(PyObject* fn);  // borrowed
// An exception class whose instances are made by BaseException's own __new__ and __init__
// (no Python code in its MRO constructs them): making one runs nothing but C code.
bool constructs_as_base_exception(PyObject* type);  // borrowed
// True for nn.Module instances.
bool is_module(PyObject* object);  // borrowed
// An object whose identity says everything the trace may use of it (a module, class,
// function, method, descriptor or nn.Module), as opposed to one carrying data that its
// guards do not pin (a numpy array, a user object): borrowed.
bool identity_is_enough(PyObject* object);
// The __module__ of a function, class or builtin as UTF-8 ("" when none).
std::string module_name_of(PyObject* object);  // borrowed

}  // namespace dynvm::vm
