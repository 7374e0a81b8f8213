// decode: walks co_code into Instructions, resolves and checks every argument and jump,
// and attaches the exception and location tables.
#include "dynvm/frontend/decode.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/frontend/normalize.h"

namespace dynvm::frontend {
namespace {

// Code objects nest once per def/class/lambda/comprehension; CPython's parser stops
// far below this.
constexpr int kMaxNesting = 200;

class Decoder {
 public:
  Decoder(const RawCode& raw, const OpcodeTable& table) : raw_(raw), table_(table) {}

  Expected<CodeInfo> run() {
    copy_fields();
    if (auto e = check_fields()) return *e;
    if (auto e = walk_code()) return *e;
    if (auto e = resolve_arguments()) return *e;
    if (auto e = read_exception_table()) return *e;
    if (auto e = read_location_table()) return *e;
    return std::move(code_);
  }

 private:
  using MaybeError = std::optional<Error>;

  Error fail(const std::string& what) const {
    return make_error("code object '" + raw_.qualname + "' (" + raw_.filename + "): " + what);
  }
  Error fail_at(uint32_t offset, const std::string& what) const {
    return fail(what + " at offset " + std::to_string(offset));
  }
  std::string name_of(const Instruction& ins) const {
    return std::string(table_[ins.code_byte].name);
  }

  void copy_fields() {
    code_.version = raw_.version;
    code_.name = raw_.name;
    code_.qualname = raw_.qualname;
    code_.filename = raw_.filename;
    code_.firstlineno = raw_.firstlineno;
    code_.flags = raw_.flags;
    code_.argcount = raw_.argcount;
    code_.posonlyargcount = raw_.posonlyargcount;
    code_.kwonlyargcount = raw_.kwonlyargcount;
    code_.stacksize = raw_.stacksize;
    code_.consts = raw_.consts;
    code_.names = raw_.names;
  }

  MaybeError check_fields() {
    if (raw_.code.size() % 2 != 0) {
      return fail("co_code has an odd length (" + std::to_string(raw_.code.size()) + " bytes)");
    }
    if (raw_.code.size() / 2 > INT32_MAX) return fail("co_code is too long");
    if (raw_.localsplusnames.size() != raw_.localspluskinds.size()) {
      return fail("co_localsplusnames has " + std::to_string(raw_.localsplusnames.size()) +
                  " names but co_localspluskinds " + std::to_string(raw_.localspluskinds.size()) +
                  " kinds");
    }
    if (raw_.argcount < 0 || raw_.posonlyargcount < 0 || raw_.kwonlyargcount < 0 ||
        raw_.posonlyargcount > raw_.argcount || raw_.stacksize < 0) {
      return fail("negative or inconsistent argument counts or stack size");
    }
    for (size_t i = 0; i < raw_.localsplusnames.size(); ++i) {
      LocalSlot slot{raw_.localsplusnames[i], raw_.localspluskinds[i]};
      auto index = static_cast<int32_t>(i);
      if (slot.is_free() && (slot.is_local() || slot.is_cell())) {
        // CPython counts such a slot as a local or a cell, not among the free variables a
        // function's closure holds one cell each for; no compiler writes it.
        return fail("localsplus slot " + std::to_string(i) + " ('" + slot.name +
                    "') is a free variable and also a local or cell variable (kind " +
                    std::to_string(slot.kind) + ")");
      }
      if (slot.is_local()) code_.varnames.push_back(index);
      if (slot.is_cell()) code_.cellvars.push_back(index);
      if (slot.is_free()) code_.freevars.push_back(index);
      code_.localsplus.push_back(std::move(slot));
    }
    if (code_.total_argcount() > static_cast<int>(code_.varnames.size())) {
      return fail("more arguments (" + std::to_string(code_.total_argcount()) +
                  ") than local variables (" + std::to_string(code_.varnames.size()) + ")");
    }
    return std::nullopt;
  }

  // Splits co_code into instructions: caches skipped, EXTENDED_ARG folded.
  MaybeError walk_code() {
    const auto& bytes = raw_.code;
    const auto units = static_cast<uint32_t>(bytes.size() / 2);
    code_.code_units = units;
    instruction_at_unit_.assign(units, -1);
    uint32_t extended = 0;
    for (uint32_t unit = 0; unit < units;) {
      Instruction ins;
      ins.offset = unit * 2;
      ins.code_byte = static_cast<uint8_t>(bytes[unit * 2]);
      const OpcodeInfo& info = table_[ins.code_byte];
      if (!info.valid) {
        return fail_at(ins.offset, "invalid opcode " + std::to_string(ins.code_byte));
      }
      ins.opcode = info.base;
      if (info.base == Opcode::CACHE) {
        return fail_at(ins.offset, "CACHE entry outside any instruction's inline caches");
      }
      if (info.base == Opcode::RESERVED) return fail_at(ins.offset, "reserved opcode 17");
      if (info.base == Opcode::INSTRUMENTED_LINE || info.base == Opcode::INSTRUMENTED_INSTRUCTION) {
        return fail_at(ins.offset, std::string(info.name) +
                                       " (instrumented code must be read through co_code)");
      }
      if (info.base == Opcode::ENTER_EXECUTOR) {
        return fail_at(ins.offset,
                       "ENTER_EXECUTOR (code that runs an executor must be read "
                       "through co_code)");
      }
      ins.arg_kind = info.arg;
      if (info.has_arg()) {
        ins.arg = extended | static_cast<uint8_t>(bytes[unit * 2 + 1]);
        extended = info.base == Opcode::EXTENDED_ARG ? ins.arg << 8 : 0;
      } else {
        extended = 0;
      }
      ins.size = static_cast<uint16_t>(1 + info.cache_entries);
      if (uint64_t{unit} + ins.size > units) {
        return fail_at(ins.offset,
                       "code ends inside the inline caches of " + std::string(info.name));
      }
      instruction_at_unit_[unit] = static_cast<int32_t>(code_.instructions.size());
      code_.instructions.push_back(ins);
      unit += ins.size;
    }
    if (!code_.instructions.empty() && code_.instructions.back().opcode == Opcode::EXTENDED_ARG) {
      return fail_at(code_.instructions.back().offset, "EXTENDED_ARG is the last instruction");
    }
    return std::nullopt;
  }

  // The instruction starting at a code unit, or -1 (past the end or inside caches).
  int32_t instruction_at_unit(int64_t unit) const {
    if (unit < 0 || unit >= static_cast<int64_t>(instruction_at_unit_.size())) return -1;
    return instruction_at_unit_[static_cast<size_t>(unit)];
  }

  MaybeError check_index(const Instruction& ins, uint64_t index, size_t size,
                         const char* table) const {
    if (index >= size) {
      return fail_at(ins.offset, name_of(ins) + ": index " + std::to_string(index) +
                                     " out of range for " + table + " (size " +
                                     std::to_string(size) + ")");
    }
    return std::nullopt;
  }

  MaybeError resolve_jump(Instruction& ins, JumpKind kind) {
    const int64_t unit = ins.offset / 2;
    int64_t target = 0;
    switch (kind) {
      case JumpKind::kForward:
        target = unit + ins.size + int64_t{ins.arg};
        break;
      case JumpKind::kBackward:
        target = unit + ins.size - int64_t{ins.arg};
        break;
      case JumpKind::kAbsolute:
        target = int64_t{ins.arg};
        break;
      case JumpKind::kNone:
        return std::nullopt;
    }
    if (target < 0 || target >= static_cast<int64_t>(code_.code_units)) {
      return fail_at(ins.offset, name_of(ins) + " jumps to offset " + std::to_string(target * 2) +
                                     ", outside the code");
    }
    int32_t index = instruction_at_unit(target);
    if (index < 0) {
      return fail_at(ins.offset, name_of(ins) + " jumps to offset " + std::to_string(target * 2) +
                                     ", which is not an instruction boundary");
    }
    ins.jump_target = index;
    ins.jump_target_offset = static_cast<uint32_t>(target * 2);
    code_.instructions[static_cast<size_t>(index)].is_jump_target = true;
    return std::nullopt;
  }

  MaybeError resolve_arguments() {
    // COMPARE_OP keeps the comparison above 4 bits (3.12: a specialisation mask) or 5 (3.13:
    // the mask and the convert-to-bool bit).
    const int compare_shift = code_.version.minor >= 13 ? 5 : code_.version.minor == 12 ? 4 : 0;
    const size_t nlocals = code_.localsplus.size();
    for (auto& ins : code_.instructions) {
      const OpcodeInfo& info = table_[ins.code_byte];
      const uint32_t arg = ins.arg;
      MaybeError error;
      switch (ins.arg_kind) {
        case ArgKind::kNone:
        case ArgKind::kInt:
        case ArgKind::kMakeFunctionFlags:
          break;
        case ArgKind::kConst:
          ins.index = static_cast<int32_t>(arg);
          error = check_index(ins, arg, code_.consts.size(), "co_consts");
          break;
        case ArgKind::kName:
          ins.index = static_cast<int32_t>(arg);
          if (ins.opcode == Opcode::LOAD_METHOD) ins.arg_flags |= kArgMethod;
          error = check_index(ins, arg, code_.names.size(), "co_names");
          break;
        case ArgKind::kGlobalName:
          ins.index = static_cast<int32_t>(arg >> 1);
          if (arg & 1) ins.arg_flags |= kArgPushNull;
          error = check_index(ins, arg >> 1, code_.names.size(), "co_names");
          break;
        case ArgKind::kAttrName:
          ins.index = static_cast<int32_t>(arg >> 1);
          if (arg & 1) ins.arg_flags |= kArgMethod;
          error = check_index(ins, arg >> 1, code_.names.size(), "co_names");
          break;
        case ArgKind::kSuperAttrName:
          ins.index = static_cast<int32_t>(arg >> 2);
          if (arg & 1) ins.arg_flags |= kArgMethod;
          if (arg & 2) ins.arg_flags |= kArgTwoArgSuper;
          error = check_index(ins, arg >> 2, code_.names.size(), "co_names");
          break;
        case ArgKind::kLocal:
        case ArgKind::kCell:
          ins.index = static_cast<int32_t>(arg);
          error = check_index(ins, arg, nlocals, "co_localsplusnames");
          break;
        case ArgKind::kLocalPair:
          ins.index = static_cast<int32_t>(arg >> 4);
          ins.arg_value = static_cast<uint8_t>(arg & 15);
          error = check_index(ins, arg >> 4, nlocals, "co_localsplusnames");
          if (!error) error = check_index(ins, arg & 15, nlocals, "co_localsplusnames");
          break;
        case ArgKind::kJump:
          error = resolve_jump(ins, info.jump);
          break;
        case ArgKind::kCompare: {
          uint32_t cmp = arg >> compare_shift;
          ins.arg_value = static_cast<uint8_t>(cmp);
          if (compare_shift == 5 && (arg & 16)) ins.arg_flags |= kArgToBool;
          error = check_index(ins, cmp, kCompareOpCount, "the comparison operators");
          break;
        }
        case ArgKind::kBinaryOp:
          ins.arg_value = static_cast<uint8_t>(arg);
          error = check_index(ins, arg, kBinaryOpCount, "the binary operators");
          break;
        case ArgKind::kIntrinsic1:
          ins.arg_value = static_cast<uint8_t>(arg);
          error = check_index(ins, arg, kIntrinsic1Count, "the unary intrinsics");
          break;
        case ArgKind::kIntrinsic2:
          ins.arg_value = static_cast<uint8_t>(arg);
          error = check_index(ins, arg, kIntrinsic2Count, "the binary intrinsics");
          break;
        case ArgKind::kFormatValue:
          ins.arg_value = static_cast<uint8_t>(arg & 3);
          if (arg & 4) ins.arg_flags |= kArgFormatSpec;
          break;
        case ArgKind::kConvertValue:
          ins.arg_value = static_cast<uint8_t>(arg);
          error = check_index(ins, arg, 4, "the conversions");
          break;
      }
      if (error) return error;
    }
    int32_t label = 0;
    for (auto& ins : code_.instructions) {
      if (ins.is_jump_target) ins.label = ++label;
    }
    return std::nullopt;
  }

  MaybeError read_exception_table() {
    auto entries = parse_exception_table(raw_.exceptiontable);
    if (!entries) return fail(entries.error().message);
    const uint32_t code_bytes = code_.code_units * 2;
    for (auto& entry : *entries) {
      std::string where = "exception table entry " + std::to_string(entry.start) + " to " +
                          std::to_string(entry.end) + " -> " + std::to_string(entry.target);
      if (entry.end > code_bytes || entry.start > entry.end) {
        return fail(where + ": outside the code (" + std::to_string(code_bytes) + " bytes)");
      }
      if (instruction_at_unit(entry.start / 2) < 0 ||
          (entry.end < code_bytes && instruction_at_unit(entry.end / 2) < 0)) {
        return fail(where + ": range does not start and end on instruction boundaries");
      }
      entry.target_index = instruction_at_unit(entry.target / 2);
      if (entry.target_index < 0) {
        return fail(where + ": handler is not the start of an instruction");
      }
    }
    code_.exception_table = std::move(*entries);
    return std::nullopt;
  }

  MaybeError read_location_table() {
    auto entries = parse_location_table(raw_.linetable, raw_.firstlineno);
    if (!entries) return fail(entries.error().message);
    // An instruction takes the positions of the entry covering its first code unit; units
    // past the table's end (or entries past the code's) have none, as in co_positions().
    size_t next = 0;
    for (const auto& entry : *entries) {
      while (next < code_.instructions.size() &&
             code_.instructions[next].offset / 2 < entry.start + entry.length) {
        if (code_.instructions[next].offset / 2 >= entry.start) {
          code_.instructions[next].positions = entry.positions;
        }
        ++next;
      }
    }
    code_.locations = std::move(*entries);
    return std::nullopt;
  }

  const RawCode& raw_;
  const OpcodeTable& table_;
  CodeInfo code_;
  std::vector<int32_t> instruction_at_unit_;
};

// Decodes one code object of a version the frontend reads, normalising it where the VM
// executes the version.
Expected<CodeInfo> decode_one(const RawCode& raw) {
  if (!is_supported_version(raw.version)) {
    return make_error("code object '" + raw.qualname + "': unsupported Python version " +
                      raw.version.to_string() + " (dynvm reads 3.11, 3.12 and 3.13)");
  }
  auto decoded = Decoder(raw, opcode_table(raw.version)).run();
  if (!decoded || !is_executable_version(raw.version)) return decoded;
  return normalize(std::move(*decoded));
}

Expected<CodeInfo> decode_nested(const RawCode& raw, int depth) {
  auto code = decode_one(raw);
  if (!code) return code;
  for (size_t i = 0; i < code->consts.size(); ++i) {
    const ConstantPtr& constant = code->consts[i];
    if (!constant || constant->kind != Constant::Kind::Code || !constant->code) continue;
    if (depth + 1 > kMaxNesting) {
      return make_error("code object '" + raw.qualname + "': code objects nested more than " +
                        std::to_string(kMaxNesting) + " deep");
    }
    auto nested = decode_nested(*constant->code, depth + 1);
    if (!nested) return nested.error();
    code->nested.push_back(
        NestedCode{static_cast<int32_t>(i), std::make_shared<const CodeInfo>(std::move(*nested))});
  }
  return code;
}

}  // namespace

Expected<CodeInfo> decode(const RawCode& raw) {
  if (!is_executable_version(raw.version)) {
    return make_error("code object '" + raw.qualname + "': the VM executes bytecode of Python " +
                      "3.11 and 3.12, not " + raw.version.to_string() +
                      (is_supported_version(raw.version) ? " (dynvm dis lists it)" : ""));
  }
  return decode_one(raw);
}

Expected<CodeInfo> decode_recursive(const RawCode& raw) { return decode_nested(raw, 0); }

}  // namespace dynvm::frontend
