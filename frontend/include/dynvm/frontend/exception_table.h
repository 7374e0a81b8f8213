// Parsing co_exceptiontable, CPython 3.11+'s table of exception handlers.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// One handler entry, in bytes as dis._parse_exception_table gives it: an exception in
// [start, end) jumps to target with the value stack cut to depth (lasti pushed first
// when lasti is set).
struct ExceptionTableEntry {
  uint32_t start = 0;
  uint32_t end = 0;  // exclusive
  uint32_t target = 0;
  uint32_t depth = 0;
  bool lasti = false;
  int32_t target_index = -1;  // the handler's instruction index, once decoded
  friend bool operator==(const ExceptionTableEntry& a, const ExceptionTableEntry& b) {
    return a.start == b.start && a.end == b.end && a.target == b.target && a.depth == b.depth &&
           a.lasti == b.lasti;
  }
};

// Reads every entry: four big-endian 6-bit varints (start, length, target in code
// units; depth << 1 | lasti), the first byte of each entry marked with bit 7. Errors
// name the byte of the table that is wrong.
Expected<std::vector<ExceptionTableEntry>> parse_exception_table(std::string_view table);

}  // namespace dynvm::frontend
