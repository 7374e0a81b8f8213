// Automatic dynamic dimensions and dynvm.mark_dynamic's marks.
#include "dynvm/runtime/dynamic_dims.h"

#include <torch/csrc/autograd/python_variable.h>

#include <vector>

#include "dynvm/vm/source_resolver.h"

namespace dynvm::runtime {

bool add_changed_dims(const Variant& variant, const vm::GuardFailure& why,
                      const vm::FrameInputs& inputs, DynamicDims* dims) {
  const vm::GuardSet& guards = variant.trace().guards;
  if (why.index >= guards.size()) return false;
  const vm::Guard& g = guards[why.index];
  if (g.kind != vm::GuardKind::TensorMatch || g.source < 0) return false;
  const vm::TensorSpec& spec = g.as<vm::TensorMatchPayload>().spec;
  vm::SourceResolver resolver(guards.sources(), inputs);
  PyObject* value = resolver.resolve(g.source);
  if (value == nullptr) {
    PyErr_Clear();
    return false;
  }
  if (reinterpret_cast<PyObject*>(Py_TYPE(value)) != spec.type.get() || !THPVariable_Check(value)) {
    return false;
  }
  std::vector<int> changed;
  try {
    const at::Tensor& t = THPVariable_Unpack(value);
    if (t.dim() != static_cast<int64_t>(spec.sizes.size()) ||
        static_cast<int8_t>(t.scalar_type()) != spec.dtype ||
        static_cast<int8_t>(t.device().type()) != spec.device_type ||
        t.requires_grad() != spec.requires_grad) {
      return false;
    }
    for (size_t d = 0; d < spec.sizes.size(); ++d) {
      if (spec.sizes[d] != -1 && t.size(static_cast<int64_t>(d)) != spec.sizes[d]) {
        changed.push_back(static_cast<int>(d));
      }
    }
  } catch (...) {
    return false;
  }
  bool added = false;
  std::set<int>& entry = (*dims)[guards.sources()[g.source].text];
  for (int d : changed) added = entry.insert(d).second || added;
  if (entry.empty()) dims->erase(guards.sources()[g.source].text);
  return added;
}

namespace {

// What reaches_marked_tensor looks through: this deep, and this many objects in all.
constexpr int kMarkSearchDepth = 4;
constexpr int kMarkSearchObjects = 4096;

bool marked(PyObject* tensor) {
  PyRef marks = PyRef::steal(PyObject_GetAttrString(tensor, "_dynvm_dynamic_dims"));
  if (!marks) {
    PyErr_Clear();
    return false;
  }
  Py_ssize_t n = PyObject_Length(marks.get());
  if (n < 0) PyErr_Clear();
  return n > 0;
}

bool search(PyObject* value, int depth, int* budget) {
  if (value == nullptr || depth > kMarkSearchDepth || --*budget < 0) return false;
  if (THPVariable_Check(value)) return marked(value);
  if (PyList_Check(value) || PyTuple_Check(value)) {
    PyRef items = PyRef::steal(PySequence_Fast(value, ""));
    if (!items) {
      PyErr_Clear();
      return false;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items.get()); ++i) {
      if (search(PySequence_Fast_GET_ITEM(items.get(), i), depth + 1, budget)) return true;
    }
    return false;
  }
  if (PyDict_Check(value)) {
    PyObject* item = nullptr;
    for (Py_ssize_t pos = 0; PyDict_Next(value, &pos, nullptr, &item);) {
      if (search(item, depth + 1, budget)) return true;
    }
    return false;
  }
  // A plain object's attributes (a batch or config object); a module's are its parameters
  // and buffers, whose sizes stay fixed.
  if (PyModule_Check(value) || PyType_Check(value) || PyCallable_Check(value)) return false;
  PyObject** dict = _PyObject_GetDictPtr(value);
  return dict != nullptr && *dict != nullptr && search(*dict, depth, budget);
}

}  // namespace

bool reaches_marked_tensor(const std::vector<PyObject*>& values) {
  int budget = kMarkSearchObjects;
  for (PyObject* value : values) {
    if (search(value, 0, &budget)) return true;
  }
  return false;
}

}  // namespace dynvm::runtime
