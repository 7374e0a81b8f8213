// Helpers of the text-file tests (golden files): a file's text, and one of its sections.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dynvm::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text between the line `header` and the next line starting with "# " (or the end).
inline std::string section(const std::string& text, const std::string& header) {
  size_t start = text.find(header + "\n");
  if (start == std::string::npos) return "";
  start += header.size() + 1;
  size_t end = start;
  while (end < text.size()) {
    if (text.compare(end, 2, "# ") == 0) break;
    size_t next = text.find('\n', end);
    end = next == std::string::npos ? text.size() : next + 1;
  }
  return text.substr(start, end - start);
}

}  // namespace dynvm::testing
