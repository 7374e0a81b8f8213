// Helpers of the text-file tests (golden files): a file's text, and one of its sections.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// The `*.txt` files of tests/data/<folder>, sorted by name.
inline std::vector<std::filesystem::path> text_files(const std::string& folder) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(DYNVM_TEST_DATA_DIR) + "/" + folder)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace dynvm::testing
