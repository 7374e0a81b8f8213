// Looks up, once, the Python objects the VM recognises by identity.
#include "known_objects.h"

#include <string>

namespace dynvm::vm {

namespace {

PyRef attr(PyObject* base, const char* dotted) {
  PyRef current = PyRef::borrow(base);
  std::string path(dotted);
  size_t start = 0;
  while (current && start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    current = PyRef::steal(PyObject_GetAttrString(current.get(), part.c_str()));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!current) PyErr_Clear();
  return current;
}

KnownObjects* load() {
  auto* k = new KnownObjects();
  k->torch = PyRef::steal(PyImport_ImportModule("torch"));
  if (!k->torch) return nullptr;
  PyRef nn = PyRef::steal(PyImport_ImportModule("torch.nn"));
  if (!nn) return nullptr;
  k->tracing = PyRef::steal(PyImport_ImportModule("dynvm._tracing"));
  if (!k->tracing) return nullptr;
  PyObject* t = k->torch.get();
  k->tensor_type = attr(t, "Tensor");
  k->tensor_base_type = attr(t, "_C._TensorBase");
  if (!k->tensor_base_type) k->tensor_base_type = attr(t, "_C.TensorBase");
  k->parameter_type = attr(t, "nn.Parameter");
  k->module_type = attr(t, "nn.Module");
  k->sequential_type = attr(t, "nn.Sequential");
  k->module_list_type = attr(t, "nn.ModuleList");
  k->module_dict_type = attr(t, "nn.ModuleDict");
  k->size_type = attr(t, "Size");
  k->sym_int_type = attr(t, "SymInt");
  k->sym_float_type = attr(t, "SymFloat");
  k->sym_bool_type = attr(t, "SymBool");
  k->dtype_type = attr(t, "dtype");
  k->device_type = attr(t, "device");
  k->layout_type = attr(t, "layout");
  k->memory_format_type = attr(t, "memory_format");
  k->no_grad = attr(t, "no_grad");
  k->enable_grad = attr(t, "enable_grad");
  k->set_grad_enabled = attr(t, "set_grad_enabled");
  k->inference_mode = attr(t, "inference_mode");
  k->autocast = attr(t, "autocast");
  k->record_function = attr(t, "autograd.profiler.record_function");
  k->is_grad_enabled = attr(t, "is_grad_enabled");
  k->jit_is_scripting = attr(t, "jit.is_scripting");
  k->jit_is_tracing = attr(t, "jit.is_tracing");
  // torch._dynamo's own spelling is recognised by name (is_compiling_flag): reading it
  // here would import Dynamo.
  for (const char* name :
       {"compiler.is_compiling", "compiler.is_dynamo_compiling", "_utils.is_compiling"}) {
    PyRef found = attr(t, name);
    if (found) k->is_compiling.push_back(std::move(found));
  }
  k->is_exporting = attr(t, "compiler.is_exporting");
  k->autograd_function = attr(t, "autograd.Function");
  k->function_setup_context = attr(t, "autograd.Function.setup_context");
  if (k->autograd_function) {
    PyRef apply = PyRef::steal(PyObject_GetAttrString(k->autograd_function.get(), "apply"));
    if (apply && PyMethod_Check(apply.get())) {
      k->autograd_function_apply = PyRef::borrow(PyMethod_GET_FUNCTION(apply.get()));
    }
    PyErr_Clear();
  }
  k->module_call = attr(t, "nn.Module.__call__");
  k->module_getattr = attr(t, "nn.Module.__getattr__");
  k->operator_module = PyRef::steal(PyImport_ImportModule("operator"));
  PyRef collections = PyRef::steal(PyImport_ImportModule("collections"));
  if (!collections) return nullptr;
  k->ordered_dict_type = attr(collections.get(), "OrderedDict");
  k->object_getattribute =
      attr(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__getattribute__");
  PyRef collections_abc = PyRef::steal(PyImport_ImportModule("collections.abc"));
  if (!collections_abc) return nullptr;
  k->mapping_contains = attr(collections_abc.get(), "Mapping.__contains__");
  k->mapping_get = attr(collections_abc.get(), "Mapping.get");
  k->sequence_iter = attr(collections_abc.get(), "Sequence.__iter__");
  PyRef inspect = PyRef::steal(PyImport_ImportModule("inspect"));
  if (!inspect) return nullptr;
  k->inspect_signature = attr(inspect.get(), "signature");
  PyRef copy = PyRef::steal(PyImport_ImportModule("copy"));
  if (!copy) return nullptr;
  k->copy_copy = attr(copy.get(), "copy");
  k->copy_deepcopy = attr(copy.get(), "deepcopy");
  PyRef enum_module = PyRef::steal(PyImport_ImportModule("enum"));
  if (!enum_module) return nullptr;
  k->enum_type = attr(enum_module.get(), "Enum");
  if (k->tracing) {
    k->grad_mode_exit_type = PyRef::steal(PyObject_GetAttrString(k->tracing.get(), "GradModeExit"));
    k->unchanged_exit = PyRef::steal(PyObject_GetAttrString(k->tracing.get(), "unchanged_exit"));
  }
  k->builtins = PyRef::borrow(PyEval_GetBuiltins());
  return k;
}

}  // namespace

const KnownObjects* KnownObjects::get() {
  static KnownObjects* known = nullptr;  // leaked on purpose: lives as long as the process
  if (known == nullptr) known = load();
  return known;
}

bool is_tensor(PyObject* object) {
  const KnownObjects* k = KnownObjects::get();
  return k != nullptr &&
         PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(k->tensor_type.get()));
}

bool identity_is_enough(PyObject* o) {
  return PyModule_Check(o) || PyType_Check(o) || PyFunction_Check(o) || PyCFunction_Check(o) ||
         PyMethod_Check(o) || Py_TYPE(o) == &PyMethodDescr_Type ||
         Py_TYPE(o) == &PyWrapperDescr_Type || Py_TYPE(o) == &PyClassMethodDescr_Type ||
         is_module(o);
}

namespace {

// Whether `fn` is a Python function defined in `module` under `qualname` (matched by name,
// so that reading it needs no import of its module).
bool is_function_named(PyObject* fn, const char* module_name, const char* qualname) {
  if (!PyFunction_Check(fn)) return false;
  auto* function = reinterpret_cast<PyFunctionObject*>(fn);
  PyObject* module = function->func_module;  // borrowed
  return module != nullptr && PyUnicode_Check(module) &&
         PyUnicode_CompareWithASCIIString(module, module_name) == 0 &&
         PyUnicode_CompareWithASCIIString(function->func_qualname, qualname) == 0;
}

}  // namespace

bool is_dynamo_module_tagging(PyObject* fn) {
  if (PyMethod_Check(fn)) fn = PyMethod_GET_FUNCTION(fn);
  return is_function_named(fn, "torch._dynamo.mutation_guard", "GenerationTracker.tag");
}

bool is_compiling_flag(PyObject* fn) {
  const KnownObjects* k = KnownObjects::get();
  if (k == nullptr) return false;
  for (const PyRef& flag : k->is_compiling) {
    if (fn == flag.get()) return true;
  }
  return is_function_named(fn, "torch._dynamo.external_utils", "is_compiling");
}

PyRef type_dict(PyTypeObject* type) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyRef::steal(PyType_GetDict(type));
#else
  return PyRef::borrow(type->tp_dict);
#endif
}

bool constructs_as_base_exception(PyObject* type) {
  if (!PyExceptionClass_Check(type)) return false;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(type)->tp_mro;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyRef dict = type_dict(reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i)));
    if (!dict) continue;
    PyObject* init = PyDict_GetItemString(dict.get(), "__init__");  // borrowed
    PyObject* made = PyDict_GetItemString(dict.get(), "__new__");   // borrowed
    if ((init != nullptr && PyFunction_Check(init)) ||
        (made != nullptr && Py_TYPE(made) == &PyStaticMethod_Type)) {
      return false;
    }
  }
  return true;
}

bool is_module(PyObject* object) {
  const KnownObjects* k = KnownObjects::get();
  return k != nullptr &&
         PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(k->module_type.get()));
}

std::string module_name_of(PyObject* object) {
  PyRef name = PyRef::steal(PyObject_GetAttrString(object, "__module__"));
  if (!name || !PyUnicode_Check(name.get())) {
    PyErr_Clear();
    return "";
  }
  return PyUnicode_AsUTF8(name.get());
}

}  // namespace dynvm::vm
