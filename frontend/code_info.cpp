// CodeInfo's lookups and the names of the normalised ops.
#include "dynvm/frontend/code_info.h"

#include <algorithm>

namespace dynvm::frontend {
namespace {

constexpr std::string_view kOpNames[] = {
#define DYNVM_OP(name, operands, meaning) #name,
#include "dynvm/frontend/ops.def"
};

}  // namespace

std::string_view op_name(Op op) {
  auto index = static_cast<size_t>(op);
  return index < std::size(kOpNames) ? kOpNames[index] : std::string_view("<invalid>");
}

int32_t CodeInfo::instruction_at(uint32_t offset) const {
  auto it =
      std::lower_bound(instructions.begin(), instructions.end(), offset,
                       [](const Instruction& ins, uint32_t value) { return ins.offset < value; });
  if (it == instructions.end() || it->offset != offset) return -1;
  return static_cast<int32_t>(it - instructions.begin());
}

const ExceptionTableEntry* CodeInfo::handler_at(uint32_t offset) const {
  for (const auto& entry : exception_table) {
    if (entry.start <= offset && offset < entry.end) return &entry;
  }
  return nullptr;
}

std::string_view CodeInfo::local_name(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= localsplus.size()) return {};
  return localsplus[static_cast<size_t>(index)].name;
}

}  // namespace dynvm::frontend
