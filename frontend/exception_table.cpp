// parse_exception_table: co_exceptiontable's varint entries into ExceptionTableEntry.
#include "dynvm/frontend/exception_table.h"

#include <string>

namespace dynvm::frontend {
namespace {

// Values are code-unit counts; anything near 2**30 cannot describe real code.
constexpr uint64_t kMaxValue = uint64_t{1} << 30;

class Reader {
 public:
  explicit Reader(std::string_view table) : table_(table) {}
  bool at_end() const { return pos_ >= table_.size(); }

  // A big-endian varint of 6-bit groups, bit 6 meaning "more follows". Bit 7 must be
  // set on the entry's first byte and clear everywhere else.
  Expected<uint32_t> varint(bool entry_start) {
    uint64_t value = 0;
    bool first = true;
    while (true) {
      if (at_end()) {
        return make_error("exception table: truncated entry at byte " + std::to_string(pos_));
      }
      auto byte = static_cast<uint8_t>(table_[pos_]);
      bool marked = byte & 0x80;
      if (marked != (entry_start && first)) {
        return make_error(std::string("exception table: ") +
                          (marked ? "unexpected entry-start bit" : "missing entry-start bit") +
                          " at byte " + std::to_string(pos_));
      }
      value = (value << 6) | (byte & 63);
      if (value >= kMaxValue) {
        return make_error("exception table: varint too large at byte " + std::to_string(pos_));
      }
      ++pos_;
      first = false;
      if (!(byte & 0x40)) return static_cast<uint32_t>(value);
    }
  }

 private:
  std::string_view table_;
  size_t pos_ = 0;
};

}  // namespace

Expected<std::vector<ExceptionTableEntry>> parse_exception_table(std::string_view table) {
  std::vector<ExceptionTableEntry> entries;
  Reader reader(table);
  while (!reader.at_end()) {
    auto start = reader.varint(/*entry_start=*/true);
    if (!start) return start.error();
    auto length = reader.varint(false);
    if (!length) return length.error();
    auto target = reader.varint(false);
    if (!target) return target.error();
    auto depth_lasti = reader.varint(false);
    if (!depth_lasti) return depth_lasti.error();
    ExceptionTableEntry entry;
    entry.start = *start * 2;
    entry.end = (*start + *length) * 2;
    entry.target = *target * 2;
    entry.depth = *depth_lasti >> 1;
    entry.lasti = *depth_lasti & 1;
    entries.push_back(entry);
  }
  return entries;
}

}  // namespace dynvm::frontend
