// Parsing co_linetable, CPython 3.11+'s location table (source positions per code unit).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// Source span of code; -1 where CPython says None. Columns are 0-based UTF-8 byte
// offsets, the end column exclusive.
struct Positions {
  int line = -1;
  int end_line = -1;
  int col = -1;
  int end_col = -1;
  friend bool operator==(const Positions& a, const Positions& b) {
    return a.line == b.line && a.end_line == b.end_line && a.col == b.col && a.end_col == b.end_col;
  }
  friend bool operator!=(const Positions& a, const Positions& b) { return !(a == b); }
};

// The forms an entry takes (CPython's Objects/locations.md).
enum class LocationForm : uint8_t {
  kShort,     // codes 0-9: same line, both columns in one more byte
  kOneLine,   // codes 10-12: line delta 0-2, columns in two bytes
  kNoColumn,  // code 13: a line delta only
  kLong,      // code 14: line delta, end line delta and columns as varints
  kNone,      // code 15: no location
};

// One entry: `length` code units from `start` share `positions`.
struct LocationEntry {
  uint32_t start = 0;   // first code unit
  uint32_t length = 0;  // code units, 1..8
  LocationForm form = LocationForm::kNone;
  Positions positions;
};

// Reads every entry, lines counted from `firstlineno`. Errors name the byte of the
// table that is wrong.
Expected<std::vector<LocationEntry>> parse_location_table(std::string_view table, int firstlineno);

}  // namespace dynvm::frontend
