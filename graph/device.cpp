// Names and parsing of Device, generated from the DYNVM_DEVICE_TYPES list.
#include "dynvm/graph/device.h"

#include <charconv>

namespace dynvm::graph {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
#define DYNVM_DEVICE_TYPE_NAME(e, name) \
  case DeviceType::e:                   \
    return name;
    DYNVM_DEVICE_TYPES(DYNVM_DEVICE_TYPE_NAME)
#undef DYNVM_DEVICE_TYPE_NAME
  }
  return "?";
}

std::optional<DeviceType> parse_device_type(std::string_view name) {
#define DYNVM_DEVICE_TYPE_PARSE(e, n) \
  if (name == n) return DeviceType::e;
  DYNVM_DEVICE_TYPES(DYNVM_DEVICE_TYPE_PARSE)
#undef DYNVM_DEVICE_TYPE_PARSE
  return std::nullopt;
}

std::string to_string(const Device& device) {
  std::string text(device_type_name(device.type));
  if (device.index >= 0) text += ":" + std::to_string(device.index);
  return text;
}

std::optional<Device> parse_device(std::string_view text) {
  size_t colon = text.find(':');
  std::optional<DeviceType> type = parse_device_type(text.substr(0, colon));
  if (!type) return std::nullopt;
  Device device{*type, -1};
  if (colon == std::string_view::npos) return device;
  std::string_view digits = text.substr(colon + 1);
  if (digits.empty() || digits.front() < '0' || digits.front() > '9') return std::nullopt;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), device.index);
  if (error != std::errc() || end != digits.data() + digits.size() ||
      device.index > Device::kMaxIndex) {
    return std::nullopt;
  }
  return device;
}

}  // namespace dynvm::graph
