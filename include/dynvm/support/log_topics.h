// DYNVM_LOGS: the comma-separated topics to log ("graph,guards", or "all"), read from the
// environment on every call (so a test may change it). Shared by every layer that logs.
#pragma once

#include <cstdlib>
#include <string_view>

namespace dynvm {

inline bool log_topic_enabled(std::string_view topic) {
  const char* logs = std::getenv("DYNVM_LOGS");
  if (logs == nullptr) return false;
  std::string_view all(logs);
  size_t start = 0;
  while (start <= all.size()) {
    size_t comma = all.find(',', start);
    std::string_view item =
        all.substr(start, comma == std::string_view::npos ? all.size() - start : comma - start);
    if (item == topic || item == "all") return true;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return false;
}

}  // namespace dynvm
