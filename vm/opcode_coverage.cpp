#include "dynvm/vm/opcode_coverage.h"

#include <array>

namespace dynvm::vm {
namespace {

struct Table {
  std::array<uint64_t, frontend::kOpcodeCount> executed{};
  std::array<uint64_t, frontend::kOpcodeCount> breaks{};
  std::array<uint64_t, frontend::kOpcodeCount> refused{};
  std::array<std::map<std::string, uint64_t>, frontend::kOpcodeCount> reasons;
};

// Written only with the GIL held (the VM runs under it).
Table& table() {
  static Table* t = new Table();  // never destroyed: counts may be read at interpreter exit
  return *t;
}

size_t slot(frontend::Opcode opcode) { return static_cast<size_t>(opcode); }

}  // namespace

void count_executed(frontend::Opcode opcode) {
  if (slot(opcode) < frontend::kOpcodeCount) ++table().executed[slot(opcode)];
}

void count_break(frontend::Opcode opcode, const std::string& reason, bool refused) {
  if (slot(opcode) >= frontend::kOpcodeCount) return;
  Table& t = table();
  ++t.breaks[slot(opcode)];
  if (refused) ++t.refused[slot(opcode)];
  ++t.reasons[slot(opcode)][reason_category(reason)];
}

std::vector<OpcodeCoverage> opcode_coverage() {
  const Table& t = table();
  std::vector<OpcodeCoverage> out;
  for (size_t i = 0; i < frontend::kOpcodeCount; ++i) {
    if (t.executed[i] == 0 && t.breaks[i] == 0) continue;
    OpcodeCoverage c;
    c.opcode = static_cast<frontend::Opcode>(i);
    c.executed = t.executed[i];
    c.breaks = t.breaks[i];
    c.refused = t.refused[i];
    c.reasons = t.reasons[i];
    out.push_back(std::move(c));
  }
  return out;
}

void reset_opcode_coverage() { table() = Table(); }

std::string reason_category(const std::string& reason) {
  std::string out;
  out.reserve(reason.size());
  size_t i = 0;
  while (i < reason.size()) {
    char c = reason[i];
    // A quote opens a name when it starts a word; an apostrophe inside one ("can't") does not.
    bool opens = (c == '\'' || c == '"') &&
                 (i == 0 || reason[i - 1] == ' ' || reason[i - 1] == '(' || reason[i - 1] == '[');
    size_t close = opens ? reason.find(c, i + 1) : std::string::npos;
    if (close == std::string::npos) {
      out += c;
      ++i;
      continue;
    }
    out += c;
    out += "\xe2\x80\xa6";  // …
    out += c;
    i = close + 1;
  }
  return out;
}

}  // namespace dynvm::vm
