// parse_location_table: co_linetable's entries (all five forms) into LocationEntry.
#include "dynvm/frontend/location_table.h"

#include <cstdint>
#include <limits>
#include <string>

namespace dynvm::frontend {
namespace {

constexpr int kCodeOneLineFirst = 10;
constexpr int kCodeNoColumn = 13;
constexpr int kCodeLong = 14;
constexpr int kCodeNone = 15;

Error table_error(const char* what, size_t at) {
  return make_error(std::string("location table: ") + what + " at byte " + std::to_string(at));
}

// Reads bytes of the table; bit 7 marks the first byte of an entry and only that.
class Reader {
 public:
  explicit Reader(std::string_view table) : table_(table) {}
  bool at_end() const { return pos_ >= table_.size(); }
  size_t pos() const { return pos_; }

  Expected<uint8_t> entry_start() {
    auto b = static_cast<uint8_t>(table_[pos_]);
    if (!(b & 0x80)) return table_error("missing entry-start bit", pos_);
    ++pos_;
    return b;
  }

  Expected<uint8_t> byte() {
    if (at_end()) return table_error("truncated entry", pos_);
    auto b = static_cast<uint8_t>(table_[pos_]);
    if (b & 0x80) return table_error("entry ends early (entry-start bit)", pos_);
    ++pos_;
    return b;
  }

  // Little-endian 6-bit groups, bit 6 meaning "more follows".
  Expected<uint32_t> varint() {
    size_t at = pos_;
    uint64_t value = 0;
    for (int shift = 0;; shift += 6) {
      if (shift > 30) return table_error("varint too large", at);  // more than 32 bits
      auto b = byte();
      if (!b) return b.error();
      value |= uint64_t{static_cast<uint8_t>(*b & 63)} << shift;
      if (value > std::numeric_limits<uint32_t>::max()) return table_error("varint too large", at);
      if (!(*b & 64)) return static_cast<uint32_t>(value);
    }
  }

  // The low bit is the sign.
  Expected<int64_t> signed_varint() {
    auto u = varint();
    if (!u) return u.error();
    int64_t magnitude = *u >> 1;
    return (*u & 1) ? -magnitude : magnitude;
  }

 private:
  std::string_view table_;
  size_t pos_ = 0;
};

bool fits_int(int64_t v) {
  return v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max();
}

}  // namespace

Expected<std::vector<LocationEntry>> parse_location_table(std::string_view table, int firstlineno) {
  std::vector<LocationEntry> entries;
  Reader reader(table);
  int64_t line = firstlineno;
  uint64_t unit = 0;
  while (!reader.at_end()) {
    size_t entry_at = reader.pos();
    auto first = reader.entry_start();
    if (!first) return first.error();
    int code = (*first >> 3) & 15;
    LocationEntry entry;
    entry.start = static_cast<uint32_t>(unit);
    entry.length = (*first & 7) + 1;
    int64_t end_line = line;
    int64_t col = -1;
    int64_t end_col = -1;
    if (code == kCodeNone) {
      entry.form = LocationForm::kNone;
    } else if (code == kCodeLong) {
      entry.form = LocationForm::kLong;
      auto delta = reader.signed_varint();
      if (!delta) return delta.error();
      auto end_delta = reader.varint();
      if (!end_delta) return end_delta.error();
      auto c = reader.varint();
      if (!c) return c.error();
      auto ec = reader.varint();
      if (!ec) return ec.error();
      line += *delta;
      end_line = line + *end_delta;
      col = int64_t{*c} - 1;  // stored plus one, so that 0 means None
      end_col = int64_t{*ec} - 1;
    } else if (code == kCodeNoColumn) {
      entry.form = LocationForm::kNoColumn;
      auto delta = reader.signed_varint();
      if (!delta) return delta.error();
      line += *delta;
      end_line = line;
    } else if (code >= kCodeOneLineFirst) {
      entry.form = LocationForm::kOneLine;
      auto c = reader.byte();
      if (!c) return c.error();
      auto ec = reader.byte();
      if (!ec) return ec.error();
      line += code - kCodeOneLineFirst;
      end_line = line;
      col = *c;
      end_col = *ec;
    } else {
      entry.form = LocationForm::kShort;
      auto second = reader.byte();
      if (!second) return second.error();
      col = code * 8 + ((*second >> 4) & 7);
      end_col = col + (*second & 15);
    }
    if (!fits_int(line) || !fits_int(end_line) || !fits_int(col) || !fits_int(end_col)) {
      return table_error("line or column out of range", entry_at);
    }
    if (entry.form != LocationForm::kNone) {
      entry.positions = Positions{static_cast<int>(line), static_cast<int>(end_line),
                                  static_cast<int>(col), static_cast<int>(end_col)};
    }
    entries.push_back(entry);
    unit += entry.length;
  }
  return entries;
}

}  // namespace dynvm::frontend
