// Variant: running a captured graph on a call's tensors and rebuilding the result. The
// one runtime file that includes ATen and torch's Python bindings.
#include "dynvm/runtime/variant.h"

#include <torch/csrc/autograd/python_variable.h>

#include <utility>

#include "dynvm/codegen/aten_executor.h"
#include "dynvm/vm/source_resolver.h"

namespace dynvm::runtime {

Variant::Variant(vm::Trace trace) : trace_(std::move(trace)) {}
Variant::~Variant() = default;

Expected<std::unique_ptr<Variant>> Variant::build(vm::Trace trace) {
  std::unique_ptr<Variant> v(new Variant(std::move(trace)));
  if (v->breaks()) return v;
  auto executor = codegen::AtenExecutor::build(v->trace_.graph);
  if (!executor) return executor.error();
  v->executor_ = std::move(executor).value();
  for (const vm::InputBinding& binding : v->trace_.inputs) {
    v->input_slots_.push_back(binding.source ? v->input_sources_.intern(binding.source) : -1);
  }
  return v;
}

namespace {

PyObject* rebuild(const vm::OutputRecipe& recipe, const std::vector<at::Tensor>& outputs,
                  const vm::FrameInputs& inputs) {
  using Kind = vm::OutputRecipe::Kind;
  switch (recipe.kind) {
    case Kind::GraphOutput:
      return THPVariable_Wrap(outputs[static_cast<size_t>(recipe.index)]);
    case Kind::Constant:
    case Kind::Size:
      return Py_NewRef(recipe.constant.get());
    case Kind::FromSource: {
      PyRef value = vm::resolve_source(recipe.source, inputs);
      if (!value) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: cannot rebuild a result");
        return nullptr;
      }
      return value.release();
    }
    case Kind::Tuple:
    case Kind::List: {
      PyRef items = PyRef::steal(PyList_New(static_cast<Py_ssize_t>(recipe.items.size())));
      if (!items) return nullptr;
      for (size_t i = 0; i < recipe.items.size(); ++i) {
        PyObject* item = rebuild(recipe.items[i], outputs, inputs);
        if (item == nullptr) return nullptr;
        PyList_SET_ITEM(items.get(), static_cast<Py_ssize_t>(i), item);
      }
      if (recipe.kind == Kind::List) return items.release();
      PyRef tuple = PyRef::steal(PyList_AsTuple(items.get()));
      if (!tuple || !recipe.constant) return tuple.release();
      // A named tuple or structseq (torch.return_types.max): rebuild its type.
      PyObject* type = recipe.constant.get();
      PyRef make = PyRef::steal(PyObject_GetAttrString(type, "_make"));
      if (make) return PyObject_CallOneArg(make.get(), tuple.get());
      PyErr_Clear();
      return PyObject_CallOneArg(type, tuple.get());
    }
    case Kind::NewObject: {
      // An instance the traced code made: a fresh object with the attributes it set.
      PyObject* cls = PyTuple_GET_ITEM(recipe.constant.get(), 0);
      PyObject* names = PyTuple_GET_ITEM(recipe.constant.get(), 1);
      PyRef object = PyRef::steal(PyObject_CallMethod(cls, "__new__", "O", cls));
      if (!object) return nullptr;
      for (size_t i = 0; i < recipe.items.size(); ++i) {
        PyRef value = PyRef::steal(rebuild(recipe.items[i], outputs, inputs));
        if (!value) return nullptr;
        if (PyObject_GenericSetAttr(object.get(),
                                    PyTuple_GET_ITEM(names, static_cast<Py_ssize_t>(i)),
                                    value.get()) < 0) {
          return nullptr;
        }
      }
      return object.release();
    }
    case Kind::Dict: {
      PyRef dict = PyRef::steal(PyDict_New());
      PyObject* keys = recipe.constant.get();
      for (size_t i = 0; i < recipe.items.size(); ++i) {
        PyRef value = PyRef::steal(rebuild(recipe.items[i], outputs, inputs));
        if (!value) return nullptr;
        if (PyDict_SetItem(dict.get(), PyTuple_GET_ITEM(keys, static_cast<Py_ssize_t>(i)),
                           value.get()) < 0) {
          return nullptr;
        }
      }
      return dict.release();
    }
  }
  return nullptr;
}

}  // namespace

PyObject* Variant::run(const vm::FrameInputs& inputs) const {
  std::vector<at::Tensor> tensors;
  tensors.reserve(trace_.inputs.size());
  {
    vm::SourceResolver resolver(input_sources_, inputs);
    for (size_t i = 0; i < trace_.inputs.size(); ++i) {
      PyObject* object = input_slots_[i] >= 0 ? resolver.resolve(input_slots_[i])
                                              : trace_.inputs[i].captured.get();
      if (object == nullptr || !THPVariable_Check(object)) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: a graph input is not a tensor");
        return nullptr;
      }
      tensors.push_back(THPVariable_Unpack(object));
    }
  }
  std::vector<at::Tensor> outputs;
  try {
    outputs = executor_->run(tensors);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  PyRef result = PyRef::steal(rebuild(trace_.output, outputs, inputs));
  if (!result) return nullptr;
  // Mutations of pre-existing objects, in the order the function made them.
  for (const vm::SideEffect& effect : trace_.side_effects) {
    PyRef target = vm::resolve_source(effect.target, inputs);
    PyRef value = PyRef::steal(rebuild(effect.value, outputs, inputs));
    if (!target || !value) {
      if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: cannot replay a side effect");
      }
      return nullptr;
    }
    int rc = 0;
    switch (effect.kind) {
      case vm::SideEffect::Kind::SetAttr:
        rc = PyObject_SetAttrString(target.get(), effect.name.c_str(), value.get());
        break;
      case vm::SideEffect::Kind::ReplaceList:
        rc = PyList_SetSlice(target.get(), 0, PyList_GET_SIZE(target.get()), value.get());
        break;
      case vm::SideEffect::Kind::ReplaceDict:
        PyDict_Clear(target.get());
        rc = PyDict_Update(target.get(), value.get());
        break;
    }
    if (rc < 0) return nullptr;
  }
  return result.release();
}

}  // namespace dynvm::runtime
