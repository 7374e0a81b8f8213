// The per-version opcode tables and operator names, built from the generated X-macro lists.
#include "dynvm/frontend/opcode.h"

namespace dynvm::frontend {
namespace {

constexpr std::string_view kOpcodeNames[] = {
#define DYNVM_BASE_OPCODE(name) #name,
#include "dynvm/frontend/opcodes.def"
};

constexpr std::string_view kBinaryOpSymbols[] = {
#define DYNVM_BINARY_OP(name, symbol) symbol,
#include "dynvm/frontend/opcodes.def"
};

constexpr std::string_view kCompareOpSymbols[] = {
#define DYNVM_COMPARE_OP(name, symbol) symbol,
#include "dynvm/frontend/opcodes.def"
};

constexpr std::string_view kIntrinsic1Names[] = {
#define DYNVM_INTRINSIC_1(name) #name,
#include "dynvm/frontend/opcodes.def"
};

constexpr std::string_view kIntrinsic2Names[] = {
#define DYNVM_INTRINSIC_2(name) #name,
#include "dynvm/frontend/opcodes.def"
};

// One table entry; the kinds are pasted onto their enums' k prefix.
#define DYNVM_OPCODE(number, name, base, caches, jump, arg) \
  table[number] = OpcodeInfo{true, #name, Opcode::base, caches, JumpKind::k##jump, ArgKind::k##arg};

std::array<OpcodeInfo, 256> bytes_3_11() {
  std::array<OpcodeInfo, 256> table{};
#include "opcodes_3_11.def"
  return table;
}

std::array<OpcodeInfo, 256> bytes_3_12() {
  std::array<OpcodeInfo, 256> table{};
#include "opcodes_3_12.def"
  return table;
}

std::array<OpcodeInfo, 256> bytes_3_13() {
  std::array<OpcodeInfo, 256> table{};
#include "opcodes_3_13.def"
  return table;
}

#undef DYNVM_OPCODE

template <typename Enum, std::size_t N>
std::string_view lookup(const std::string_view (&names)[N], Enum value) {
  auto index = static_cast<std::size_t>(value);
  return index < N ? names[index] : std::string_view("<invalid>");
}

}  // namespace

OpcodeTable::OpcodeTable(PythonVersion version, const std::array<OpcodeInfo, 256>& by_byte)
    : version_(version), by_byte_(by_byte) {
  byte_of_base_.fill(-1);
  // A base opcode's own byte is the one whose name is the base's name.
  for (int byte = 0; byte < 256; ++byte) {
    const OpcodeInfo& info = by_byte_[byte];
    if (info.valid && info.name == opcode_name(info.base)) {
      byte_of_base_[static_cast<std::size_t>(info.base)] = static_cast<int16_t>(byte);
    }
  }
}

std::optional<uint8_t> OpcodeTable::byte_of(Opcode op) const {
  auto index = static_cast<std::size_t>(op);
  if (index >= kOpcodeCount || byte_of_base_[index] < 0) return std::nullopt;
  return static_cast<uint8_t>(byte_of_base_[index]);
}

bool is_supported_version(PythonVersion version) {
  return version.major == 3 && version.minor >= 11 && version.minor <= 13;
}

const OpcodeTable& opcode_table(PythonVersion version) {
  static const OpcodeTable kTable311({3, 11}, bytes_3_11());
  static const OpcodeTable kTable312({3, 12}, bytes_3_12());
  static const OpcodeTable kTable313({3, 13}, bytes_3_13());
  static const OpcodeTable kNoTable({0, 0}, std::array<OpcodeInfo, 256>{});
  if (version == PythonVersion{3, 11}) return kTable311;
  if (version == PythonVersion{3, 12}) return kTable312;
  if (version == PythonVersion{3, 13}) return kTable313;
  return kNoTable;
}

std::string_view opcode_name(Opcode op) { return lookup(kOpcodeNames, op); }
std::string_view binary_op_symbol(BinaryOp op) { return lookup(kBinaryOpSymbols, op); }
std::string_view compare_op_symbol(CompareOp op) { return lookup(kCompareOpSymbols, op); }
std::string_view intrinsic1_name(Intrinsic1 op) { return lookup(kIntrinsic1Names, op); }
std::string_view intrinsic2_name(Intrinsic2 op) { return lookup(kIntrinsic2Names, op); }

}  // namespace dynvm::frontend
