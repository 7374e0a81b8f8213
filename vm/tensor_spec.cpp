// TensorSpec from a live torch.Tensor and the TENSOR_MATCH comparison, both reading the
// at::Tensor behind the Python object (THPVariable_Unpack) rather than Python attributes.
#include "dynvm/vm/tensor_spec.h"

#include <c10/core/ScalarTypeToTypeMeta.h>
#include <torch/csrc/autograd/python_variable.h>

#include <exception>
#include <sstream>
#include <utility>

#include "dynvm/vm/torch_state.h"
#include "python_values.h"

namespace dynvm::vm {

namespace {

// The fields of a spec read from `tensor`'s impl, without judging whether dynvm supports it.
// `object` borrowed, a torch.Tensor instance. May throw c10::Error.
TensorSpec read_spec(PyObject* object, const c10::TensorImpl& impl) {
  TensorSpec spec;
  spec.type = GuardedObject(reinterpret_cast<PyObject*>(Py_TYPE(object)));
  spec.dtype = static_cast<int8_t>(c10::typeMetaToScalarType(impl.dtype()));
  c10::Device device = impl.device();
  spec.device_type = static_cast<int8_t>(device.type());
  spec.device_index = static_cast<int8_t>(device.index());
  spec.requires_grad = impl.requires_grad();
  c10::DispatchKeySet keys = impl.key_set();
  spec.dispatch_keys = keys.raw_repr();
  c10::IntArrayRef sizes = impl.sizes();
  c10::IntArrayRef strides = impl.strides();
  spec.sizes.assign(sizes.begin(), sizes.end());
  spec.strides.assign(strides.begin(), strides.end());
  return spec;
}

std::string ints_text(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

// A loop, not memcmp: shapes have a handful of dimensions and the call would cost more.
// An expected -1 (a symbolic size or stride) matches anything here.
bool same_ints(c10::IntArrayRef actual, const std::vector<int64_t>& expected) {
  size_t count = expected.size();
  if (actual.size() != count) return false;
  const int64_t* a = actual.data();
  const int64_t* b = expected.data();
  for (size_t i = 0; i < count; ++i) {
    if (a[i] != b[i] && b[i] != -1) return false;
  }
  return true;
}

// The symbolic sizes and strides of `spec` against the tensor's: binds symbols, checks the
// others; "" when they match, else why not.
std::string symbolic_mismatch(const TensorSpec& spec, c10::IntArrayRef sizes,
                              c10::IntArrayRef strides) {
  std::vector<int64_t>& values = bound_symbols();
  for (const SymDim& d : spec.symbolic) {
    c10::IntArrayRef actual = d.stride ? strides : sizes;
    if (static_cast<size_t>(d.dim) >= actual.size()) return "has fewer dimensions";
    int64_t value = actual[static_cast<size_t>(d.dim)];
    const char* what = d.stride ? "stride " : "size ";
    if (d.bind >= 0) {
      if (value < 2) {
        return std::string(what) + std::to_string(d.dim) + " is " + std::to_string(value) +
               ", and a dynamic size (s" + std::to_string(d.bind) +
               ") is at least 2 (sizes 0 and 1 are specialized)";
      }
      if (values.size() <= static_cast<size_t>(d.bind)) values.resize(d.bind + 1, 0);
      values[static_cast<size_t>(d.bind)] = value;
      continue;
    }
    std::optional<int64_t> expected = d.expr.evaluate(values);
    if (!expected || *expected != value) {
      return std::string(what) + std::to_string(d.dim) + " is " + std::to_string(value) +
             ", expected " + d.expr.to_string() +
             (expected ? " = " + std::to_string(*expected) : std::string());
    }
  }
  return "";
}

bool is_tensor(PyObject* object) {
  if (THPVariableClass == nullptr) return false;  // torch not imported
  int result = PyObject_IsInstance(object, THPVariableClass);
  if (result < 0) PyErr_Clear();
  return result == 1;
}

}  // namespace

std::vector<int64_t>& bound_symbols() {
  thread_local std::vector<int64_t> values;
  return values;
}

Expected<TensorSpec> tensor_spec_of(PyObject* tensor) {
  ErrorStash stash;
  if (!is_tensor(tensor)) {
    return make_error(std::string("not a torch.Tensor but a ") + type_name(Py_TYPE(tensor)));
  }
  try {
    const at::Tensor& value = THPVariable_Unpack(tensor);
    if (!value.defined()) return make_error("an undefined tensor");
    const c10::TensorImpl& impl = *value.unsafeGetTensorImpl();
    if (value.layout() != c10::kStrided) {
      std::ostringstream layout;
      layout << value.layout();
      return make_error("a tensor with layout " + layout.str() +
                        " (only strided dense tensors are compiled)");
    }
    if (value.is_quantized()) return make_error("a quantized tensor");
    if (value.is_nested()) return make_error("a nested tensor");
    c10::DispatchKeySet keys = impl.key_set();
    if (keys.has(c10::DispatchKey::Python) || keys.has(c10::DispatchKey::PythonTLSSnapshot)) {
      return make_error("a tensor with Python dispatch (__torch_dispatch__)");
    }
    if (keys.has(c10::DispatchKey::Functionalize)) return make_error("a functional tensor");
    if (impl.has_symbolic_sizes_strides()) return make_error("a tensor with symbolic sizes");
    c10::DeviceType device = value.device().type();
    if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA &&
        device != c10::DeviceType::Meta) {
      return make_error("a tensor on " + c10::DeviceTypeName(device, /*lower_case=*/true) +
                        " (dynvm compiles for cpu and cuda)");
    }
    TensorSpec spec = read_spec(tensor, impl);
    spec.type_name = type_name(Py_TYPE(tensor));
    return spec;
  } catch (const std::exception& error) {
    return make_error(std::string("cannot read the tensor: ") + error.what());
  }
}

bool tensor_matches(const TensorSpec& spec, PyObject* object) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(object)) != spec.type.get()) return false;
  // spec.type is a torch.Tensor type, so `object` is a THPVariable.
  try {
    const c10::TensorImpl& impl = *THPVariable_Unpack(object).unsafeGetTensorImpl();
    c10::DispatchKeySet keys = impl.key_set();
    if (keys.raw_repr() != spec.dispatch_keys) return false;
    if (static_cast<int8_t>(c10::typeMetaToScalarType(impl.dtype())) != spec.dtype) return false;
    c10::Device device = impl.device();
    if (static_cast<int8_t>(device.type()) != spec.device_type ||
        static_cast<int8_t>(device.index()) != spec.device_index) {
      return false;
    }
    if (!same_ints(impl.sizes(), spec.sizes) || !same_ints(impl.strides(), spec.strides)) {
      return false;
    }
    if (!spec.symbolic.empty() && !symbolic_mismatch(spec, impl.sizes(), impl.strides()).empty()) {
      return false;
    }
    return impl.requires_grad() == spec.requires_grad;
  } catch (...) {
    return false;
  }
}

// "[2, s0, 64]": the spec's sizes (or strides), symbolic ones as their expressions.
std::string spec_list_text(const TensorSpec& spec, bool stride) {
  std::vector<std::string> items;
  for (int64_t v : stride ? spec.strides : spec.sizes) items.push_back(std::to_string(v));
  for (const SymDim& d : spec.symbolic) {
    if (d.stride != stride || static_cast<size_t>(d.dim) >= items.size()) continue;
    items[static_cast<size_t>(d.dim)] =
        d.bind >= 0 ? "s" + std::to_string(d.bind) : d.expr.to_string();
  }
  std::string text = "[";
  for (size_t i = 0; i < items.size(); ++i) text += (i > 0 ? ", " : "") + items[i];
  return text + "]";
}

std::string to_string(const TensorSpec& spec) {
  std::string text = spec.type_name + " " + dtype_name(spec.dtype) + " " +
                     device_name(spec.device_type, spec.device_index) + " " +
                     spec_list_text(spec, false) + " stride " + spec_list_text(spec, true) +
                     " requires_grad=" + (spec.requires_grad ? "True" : "False");
  c10::DispatchKeySet keys(c10::DispatchKeySet::RAW, spec.dispatch_keys);
  if (!keys.has(c10::DispatchKey::ADInplaceOrView) &&
      !keys.has_any(c10::autograd_dispatch_keyset)) {
    text += " inference";
  }
  if (keys.has(c10::DispatchKey::Conjugate)) text += " conj";
  if (keys.has(c10::DispatchKey::Negative)) text += " neg";
  if (keys.has(c10::DispatchKey::ZeroTensor)) text += " zero";
  return text;
}

std::string tensor_mismatch(const TensorSpec& spec, PyObject* object) {
  ErrorStash stash;
  if (!is_tensor(object)) {
    return "is a " + type_name(Py_TYPE(object)) + ", not a tensor";
  }
  std::string expected_type = spec.type_name;
  std::string actual_type = type_name(Py_TYPE(object));
  try {
    TensorSpec actual = read_spec(object, *THPVariable_Unpack(object).unsafeGetTensorImpl());
    actual.type_name = actual_type;
    std::string reasons;
    auto add = [&reasons](const std::string& reason) {
      reasons += (reasons.empty() ? "" : ", ") + reason;
    };
    if (actual.type.get() != spec.type.get()) {
      add("type is " + actual_type + ", expected " + expected_type);
    }
    if (actual.dtype != spec.dtype) {
      add("dtype is " + dtype_name(actual.dtype) + ", expected " + dtype_name(spec.dtype));
    }
    if (actual.device_type != spec.device_type || actual.device_index != spec.device_index) {
      add("device is " + device_name(actual.device_type, actual.device_index) + ", expected " +
          device_name(spec.device_type, spec.device_index));
    }
    if (!same_ints(actual.sizes, spec.sizes)) {
      add("sizes are " + ints_text(actual.sizes) + ", expected " + spec_list_text(spec, false));
    }
    if (!same_ints(actual.strides, spec.strides)) {
      add("strides are " + ints_text(actual.strides) + ", expected " + spec_list_text(spec, true));
    }
    if (!spec.symbolic.empty() && actual.sizes.size() == spec.sizes.size()) {
      std::string why = symbolic_mismatch(spec, actual.sizes, actual.strides);
      if (!why.empty()) add(why);
    }
    if (actual.requires_grad != spec.requires_grad) {
      add(std::string("requires_grad is ") + (actual.requires_grad ? "True" : "False"));
    }
    if (actual.dispatch_keys != spec.dispatch_keys) {
      c10::DispatchKeySet keys(c10::DispatchKeySet::RAW, actual.dispatch_keys);
      add("dispatch keys are " + c10::toString(keys));
    }
    if (reasons.empty()) reasons = "matches";  // it changed between the check and now
    return reasons + "; actual: " + to_string(actual);
  } catch (const std::exception& error) {
    return std::string("cannot read the tensor: ") + error.what();
  }
}

}  // namespace dynvm::vm
