// TensorSpec: what a TENSOR_MATCH guard records of a torch.Tensor, read from a live tensor and
// compared against one. ATen stays out of this header (tensor_spec.cpp reads the at::Tensor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dynvm/graph/sym_expr.h"
#include "dynvm/support/expected.h"
#include "dynvm/vm/guarded_object.h"

namespace dynvm::vm {

// A size or stride of a tensor traced with dynamic shapes: either it binds symbol `bind`
// (the first place the symbol occurs, its value at least 2: sizes 0 and 1 are never
// symbolic), or it must equal `expr` over symbols bound before it.
struct SymDim {
  int dim = 0;
  bool stride = false;
  int32_t bind = -1;
  graph::SymExpr expr;
  friend bool operator==(const SymDim& a, const SymDim& b) {
    return a.dim == b.dim && a.stride == b.stride && a.bind == b.bind && a.expr == b.expr;
  }
};

// The symbol values the TENSOR_MATCH checks of this thread bound last (symbol i at index
// i): a variant's SHAPE_RELATIONS guard, after its tensor guards, reads them.
std::vector<int64_t>& bound_symbols();

struct TensorSpec {
  GuardedObject type;      // the exact Python type: torch.Tensor, nn.Parameter or a subclass
  std::string type_name;   // "torch.Tensor", "torch.nn.parameter.Parameter"
  int8_t dtype = 0;        // a c10::ScalarType
  int8_t device_type = 0;  // a c10::DeviceType
  int8_t device_index = -1;
  bool requires_grad = false;
  uint64_t dispatch_keys = 0;    // c10::DispatchKeySet::raw_repr(): also tells inference/conj/neg
  std::vector<int64_t> sizes;    // -1 where `symbolic` decides
  std::vector<int64_t> strides;  // -1 where `symbolic` decides
  std::vector<SymDim> symbolic;  // dynamic shapes; empty for fixed sizes

  // Types compare by identity, everything else by value.
  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.type.get() == b.type.get() && a.dtype == b.dtype && a.device_type == b.device_type &&
           a.device_index == b.device_index && a.requires_grad == b.requires_grad &&
           a.dispatch_keys == b.dispatch_keys && a.sizes == b.sizes && a.strides == b.strides &&
           a.symbolic == b.symbolic;
  }
  friend bool operator!=(const TensorSpec& a, const TensorSpec& b) { return !(a == b); }
};

// GIL held; `tensor` borrowed. The spec of a torch.Tensor (or subclass) instance, or an Error
// for anything else and for tensors dynvm does not compile: not a plain strided dense tensor
// (sparse, quantized, nested, mkldnn), a tensor with Python dispatch (__torch_dispatch__
// subclasses, FakeTensor), a functional wrapper, symbolic sizes, or a device other than cpu,
// cuda and meta.
Expected<TensorSpec> tensor_spec_of(PyObject* tensor);

// GIL held; `object` borrowed. True when `object`'s type is exactly spec.type and its tensor
// has spec's dtype, device, sizes, strides, requires_grad and dispatch keys. Never raises and
// allocates nothing.
bool tensor_matches(const TensorSpec& spec, PyObject* object);

// "torch.Tensor float32 cpu [2, 3] stride [3, 1] requires_grad=False", plus " inference",
// " conj" or " neg" for tensors carrying those dispatch keys.
std::string to_string(const TensorSpec& spec);

// GIL held; `object` borrowed. Why `object` does not match `spec`, for GuardFailure: e.g.
// "dtype is float64, expected float32; actual: torch.Tensor float64 cpu [2, 3] ...". Never
// raises.
std::string tensor_mismatch(const TensorSpec& spec, PyObject* object);

}  // namespace dynvm::vm
