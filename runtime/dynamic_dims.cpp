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

void add_marked_dims(const std::vector<PyObject*>& arguments, const std::vector<std::string>& names,
                     DynamicDims* dims) {
  for (size_t i = 0; i < arguments.size() && i < names.size(); ++i) {
    PyObject* value = arguments[i];
    if (value == nullptr || !THPVariable_Check(value)) continue;
    PyRef marks = PyRef::steal(PyObject_GetAttrString(value, "_dynvm_dynamic_dims"));
    if (!marks) {
      PyErr_Clear();
      continue;
    }
    PyRef iterator = PyRef::steal(PyObject_GetIter(marks.get()));
    if (!iterator) {
      PyErr_Clear();
      continue;
    }
    std::string source = "L['" + names[i] + "']";
    while (PyRef item = PyRef::steal(PyIter_Next(iterator.get()))) {
      long d = PyLong_AsLong(item.get());
      if (d >= 0) (*dims)[source].insert(static_cast<int>(d));
    }
    PyErr_Clear();
  }
}

}  // namespace dynvm::runtime
