// The global torch state a trace depends on (grad mode, default dtype, autocast), read from
// the calling thread; global-state guards record it at trace time and compare on every call.
#pragma once

#include <cstdint>
#include <string>

namespace dynvm::vm {

// torch.is_grad_enabled() of the calling thread.
bool grad_mode_enabled();

// torch.get_default_dtype(), as a c10::ScalarType.
int8_t default_dtype();

// Whether autocast is on for each device type (torch.is_autocast_enabled("cpu"),
// torch.is_autocast_enabled("cuda")) on the calling thread, and the dtype it casts to
// (torch.get_autocast_dtype), which matters only where it is on.
struct AutocastState {
  bool cpu = false;
  bool cuda = false;
  int8_t cpu_dtype = 0;  // a c10::ScalarType
  int8_t cuda_dtype = 0;
  friend bool operator==(const AutocastState& a, const AutocastState& b) {
    return a.cpu == b.cpu && a.cuda == b.cuda && (!a.cpu || a.cpu_dtype == b.cpu_dtype) &&
           (!a.cuda || a.cuda_dtype == b.cuda_dtype);
  }
  friend bool operator!=(const AutocastState& a, const AutocastState& b) { return !(a == b); }
};
AutocastState autocast_state();

// "cpu=False cuda=True(bfloat16)": a state as guards and their failures print it.
std::string to_string(const AutocastState& state);

// A c10::ScalarType as torch spells it in Python: "float32", "int64", "bool".
std::string dtype_name(int8_t scalar_type);

// A c10::DeviceType and index as torch prints a device: "cpu", "cuda:0", "meta".
std::string device_name(int8_t device_type, int8_t device_index);

}  // namespace dynvm::vm
