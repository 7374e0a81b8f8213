// Device: where a tensor lives (type and optional index, "cuda:0"), device types listed once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dynvm::graph {

// X(enumerator, name as torch spells it)
#define DYNVM_DEVICE_TYPES(X) \
  X(Cpu, "cpu")               \
  X(Cuda, "cuda")             \
  X(Meta, "meta")

enum class DeviceType : uint8_t {
#define DYNVM_DEVICE_TYPE_ENUM(e, name) e,
  DYNVM_DEVICE_TYPES(DYNVM_DEVICE_TYPE_ENUM)
#undef DYNVM_DEVICE_TYPE_ENUM
};

std::string_view device_type_name(DeviceType type);
std::optional<DeviceType> parse_device_type(std::string_view name);

struct Device {
  // The largest index the text format accepts; torch's own limit is lower.
  static constexpr int32_t kMaxIndex = 1 << 20;

  DeviceType type = DeviceType::Cpu;
  int32_t index = -1;  // -1: no index given ("cpu", "cuda" = the current device)

  static Device cpu() { return Device{}; }
  static Device cuda(int32_t index) { return Device{DeviceType::Cuda, index}; }
  static Device meta() { return Device{DeviceType::Meta, -1}; }

  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// "cpu", "cuda:0".
std::string to_string(const Device& device);
// Inverse of to_string; nullopt for anything else.
std::optional<Device> parse_device(std::string_view text);

}  // namespace dynvm::graph
