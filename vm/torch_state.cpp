// Reading torch's global state (grad mode, default dtype, autocast) and naming dtypes and
// devices the way torch prints them.
#include "dynvm/vm/torch_state.h"

#include <ATen/autocast_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/GradMode.h>
#include <c10/core/ScalarType.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace dynvm::vm {

bool grad_mode_enabled() { return c10::GradMode::is_enabled(); }

int8_t default_dtype() { return static_cast<int8_t>(c10::get_default_dtype_as_scalartype()); }

AutocastState autocast_state() {
  // torch.is_autocast_*enabled() is "the autocast key is not excluded on this thread".
  AutocastState state;
  state.cpu = !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutocastCPU);
  state.cuda = !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutocastCUDA);
  if (state.cpu) {
    state.cpu_dtype = static_cast<int8_t>(at::autocast::get_autocast_dtype(c10::DeviceType::CPU));
  }
  if (state.cuda) {
    state.cuda_dtype = static_cast<int8_t>(at::autocast::get_autocast_dtype(c10::DeviceType::CUDA));
  }
  return state;
}

std::string to_string(const AutocastState& state) {
  auto one = [](bool on, int8_t dtype) {
    return on ? "True(" + dtype_name(dtype) + ")" : std::string("False");
  };
  return "cpu=" + one(state.cpu, state.cpu_dtype) + " cuda=" + one(state.cuda, state.cuda_dtype);
}

std::string dtype_name(int8_t scalar_type) {
  auto type = static_cast<c10::ScalarType>(scalar_type);
  switch (type) {
    case c10::ScalarType::Bool:
      return "bool";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Char:
      return "int8";
    case c10::ScalarType::Short:
      return "int16";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::ComplexHalf:
      return "complex32";
    case c10::ScalarType::ComplexFloat:
      return "complex64";
    case c10::ScalarType::ComplexDouble:
      return "complex128";
    default:
      break;
  }
  if (scalar_type < 0 || scalar_type >= static_cast<int8_t>(c10::ScalarType::NumOptions)) {
    return "dtype#" + std::to_string(scalar_type);
  }
  return c10::toString(type);  // the rarer ones (quantized, float8) by c10's name
}

std::string device_name(int8_t device_type, int8_t device_index) {
  auto type = static_cast<c10::DeviceType>(device_type);
  if (!c10::isValidDeviceType(type)) return "device#" + std::to_string(device_type);
  std::string name = c10::DeviceTypeName(type, /*lower_case=*/true);
  if (device_index >= 0) name += ":" + std::to_string(device_index);
  return name;
}

}  // namespace dynvm::vm
