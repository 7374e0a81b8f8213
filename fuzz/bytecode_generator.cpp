// The tracer fuzzer's bytecode generator (bytecode_generator.h).
#include "bytecode_generator.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "dynvm/frontend/opcode.h"
#include "dynvm/frontend/stack_effect.h"

namespace dynvm::fuzz {

using frontend::ArgKind;
using frontend::JumpKind;
using frontend::Opcode;
using frontend::OpcodeInfo;
using frontend::OpcodeTable;

std::string ByteReader::bytes(size_t n) {
  n = std::min(n, left());
  std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return out;
}

void append_exception_entry(std::string& table, uint32_t start, uint32_t length, uint32_t target,
                            uint32_t depth, bool lasti) {
  // Big-endian groups of 6 bits, bit 6 set on all but the last; bit 7 on the entry's first.
  auto varint = [&table](uint32_t value, bool first) {
    int shift = 0;
    while (shift + 6 < 32 && (value >> (shift + 6)) != 0) shift += 6;
    for (; shift >= 0; shift -= 6) {
      auto byte = static_cast<uint8_t>((value >> shift) & 63);
      if (shift > 0) byte |= 64;
      if (first) byte |= 128;
      first = false;
      table.push_back(static_cast<char>(byte));
    }
  };
  varint(start, true);
  varint(length, false);
  varint(target, false);
  varint(depth << 1 | (lasti ? 1 : 0), false);
}

void append_line_entry(std::string& table, uint32_t units, int line_delta) {
  // Form 13 (a line, no columns) for up to 8 code units: a signed varint of the line delta,
  // little-endian groups of 6 bits with bit 6 meaning "more follows".
  constexpr int kNoColumns = 13;
  while (units > 0) {
    uint32_t length = std::min<uint32_t>(units, 8);
    table.push_back(static_cast<char>(0x80 | kNoColumns << 3 | (length - 1)));
    uint32_t value = line_delta < 0 ? (static_cast<uint32_t>(-line_delta) << 1) | 1
                                    : static_cast<uint32_t>(line_delta) << 1;
    while (value >= 64) {
      table.push_back(static_cast<char>(64 | (value & 63)));
      value >>= 6;
    }
    table.push_back(static_cast<char>(value));
    units -= length;
    line_delta = 0;
  }
}

namespace {

// One instruction of the body before layout.
struct Item {
  uint8_t byte = 0;
  uint32_t arg = 0;
  int target = -1;   // jumps: the instruction index jumped to
  int prefixes = 0;  // EXTENDED_ARG units in front of it
};

class Generator {
 public:
  Generator(const CodeShape& shape, ByteReader& in)
      : shape_(shape), in_(in), table_(frontend::opcode_table(shape.version)) {
    for (int b = 0; b < 256; ++b) {
      const OpcodeInfo& info = table_[static_cast<uint8_t>(b)];
      if (!info.valid || table_.byte_of(info.base) != b) continue;  // specialised forms
      if (info.base == Opcode::CACHE || info.base == Opcode::RESERVED ||
          info.base == Opcode::EXTENDED_ARG || info.base == Opcode::ENTER_EXECUTOR ||
          info.name.rfind("INSTRUMENTED_", 0) == 0) {
        continue;
      }
      vocabulary_.push_back(static_cast<uint8_t>(b));
    }
  }

  GeneratedCode run(size_t max_instructions, bool terminate, bool exception_table) {
    for (size_t i = 0; i < max_instructions && in_.left() >= 2; ++i) {
      uint8_t choice = in_.byte();
      uint8_t a = in_.byte();
      add(vocabulary_[choice % vocabulary_.size()], a);
    }
    if (terminate) {
      if (auto constant = table_.byte_of(Opcode::RETURN_CONST); constant && shape_.consts > 0) {
        items_.push_back(Item{*constant, 0});
      } else if (shape_.consts > 0) {
        items_.push_back(Item{*table_.byte_of(Opcode::LOAD_CONST), 0});
        items_.push_back(Item{*table_.byte_of(Opcode::RETURN_VALUE), 0});
      }
    }
    if (items_.empty()) items_.push_back(Item{*table_.byte_of(Opcode::NOP), 0});
    resolve_jumps();
    layout();
    GeneratedCode out;
    out.instructions = items_.size();
    out.code = shape_.prologue;
    for (const Item& item : items_) emit(out.code, item);
    out.linetable = line_table();
    if (exception_table) out.exceptiontable = handlers();
    return out;
  }

 private:
  uint32_t prologue_units() const { return static_cast<uint32_t>(shape_.prologue.size() / 2); }

  // The argument an instruction of this kind gets from the byte `a`; nullopt when the code
  // object has nothing it could name.
  std::optional<uint32_t> argument(const OpcodeInfo& info, uint8_t a) const {
    auto index = [](size_t size, uint32_t value) -> std::optional<uint32_t> {
      if (size == 0) return std::nullopt;
      return static_cast<uint32_t>(value % size);
    };
    switch (info.arg) {
      case ArgKind::kNone:
        return 0;
      case ArgKind::kInt:
        // Mostly small counts and flags; now and then one far too large.
        return a < 0xF0 ? a & 7u : a;
      case ArgKind::kConst:
        return index(shape_.consts, a);
      case ArgKind::kName:
        return index(shape_.names, a);
      case ArgKind::kGlobalName:
      case ArgKind::kAttrName: {
        auto name = index(shape_.names, a >> 1);
        if (!name) return std::nullopt;
        return *name << 1 | (a & 1u);
      }
      case ArgKind::kSuperAttrName: {
        auto name = index(shape_.names, a >> 2);
        if (!name) return std::nullopt;
        return *name << 2 | (a & 3u);
      }
      case ArgKind::kLocal:
      case ArgKind::kCell:
        return index(shape_.localsplus, a);
      case ArgKind::kLocalPair:
        return a;
      case ArgKind::kJump:
        return 0;  // laid out later
      case ArgKind::kCompare: {
        const int shift = shape_.version.minor >= 13 ? 5 : shape_.version.minor == 12 ? 4 : 0;
        return static_cast<uint32_t>(a % frontend::kCompareOpCount) << shift;
      }
      case ArgKind::kBinaryOp:
        return static_cast<uint32_t>(a % frontend::kBinaryOpCount);
      case ArgKind::kIntrinsic1:
        return static_cast<uint32_t>(a % frontend::kIntrinsic1Count);
      case ArgKind::kIntrinsic2:
        return static_cast<uint32_t>(a % frontend::kIntrinsic2Count);
      case ArgKind::kFormatValue:
        return a & 7u;
      case ArgKind::kConvertValue:
        return a % 4u;
      case ArgKind::kMakeFunctionFlags:
        return a & 15u;
    }
    return std::nullopt;
  }

  // Pushes one operand: a local, a constant or a global, chosen by `a`.
  void push_operand(uint8_t a) {
    const int kind = a % 3;
    if (kind == 0 && shape_.localsplus > 0) {
      items_.push_back(Item{*table_.byte_of(Opcode::LOAD_FAST),
                            static_cast<uint32_t>((a / 3) % shape_.localsplus)});
    } else if (kind == 1 && shape_.names > 0) {
      items_.push_back(Item{*table_.byte_of(Opcode::LOAD_GLOBAL),
                            static_cast<uint32_t>((a / 3) % shape_.names) << 1});
    } else if (shape_.consts > 0) {
      items_.push_back(Item{*table_.byte_of(Opcode::LOAD_CONST),
                            static_cast<uint32_t>((a / 3) % shape_.consts)});
    } else {
      items_.push_back(Item{*table_.byte_of(Opcode::PUSH_NULL), 0});
    }
    ++depth_;
  }

  void add(uint8_t byte, uint8_t a) {
    const OpcodeInfo& info = table_[byte];
    std::optional<uint32_t> arg = argument(info, a);
    if (!arg) return;
    Item item{byte, *arg};
    if (info.jump != JumpKind::kNone) item.target = a;
    // What the instruction takes from the stack, as far as its net effect tells: operands
    // the stack lacks are pushed first, as compiled code loads them.
    std::optional<int> effect = frontend::stack_effect(shape_.version, byte, static_cast<int>(*arg),
                                                       /*jump=*/false);
    const int net = effect.value_or(0);
    const int needed = net < 0 ? 1 - net : net == 0 ? 1 : 0;
    for (int i = 0; depth_ < needed && i < 16; ++i) push_operand(static_cast<uint8_t>(a + i * 7));
    items_.push_back(item);
    depth_ = std::max(0, depth_ + net);
  }

  // Jump targets from the bytes: forward jumps go forward, backward ones back (or to
  // themselves), as the opcode's direction says.
  void resolve_jumps() {
    const int n = static_cast<int>(items_.size());
    for (int i = 0; i < n; ++i) {
      Item& item = items_[static_cast<size_t>(i)];
      if (item.target < 0) continue;
      int target = item.target % n;
      switch (table_[item.byte].jump) {
        case JumpKind::kForward:
          if (target <= i) target = std::min(i + 1, n - 1);
          break;
        case JumpKind::kBackward:
          if (target > i) target = i;
          break;
        default:
          break;
      }
      item.target = target;
    }
  }

  uint32_t units_of(const Item& item) const {
    return static_cast<uint32_t>(item.prefixes) + 1 + table_[item.byte].cache_entries;
  }

  // Offsets and jump arguments, growing EXTENDED_ARG prefixes until they fit.
  void layout() {
    for (int round = 0; round < 8; ++round) {
      starts_.assign(items_.size(), 0);
      uint32_t unit = prologue_units();
      for (size_t i = 0; i < items_.size(); ++i) {
        starts_[i] = unit;
        unit += units_of(items_[i]);
      }
      bool changed = false;
      for (size_t i = 0; i < items_.size(); ++i) {
        Item& item = items_[i];
        const OpcodeInfo& info = table_[item.byte];
        if (item.target >= 0) {
          const uint32_t after = starts_[i] + units_of(item);
          const uint32_t to = starts_[static_cast<size_t>(item.target)];
          switch (info.jump) {
            case JumpKind::kForward:
              item.arg = to >= after ? to - after : 0;
              break;
            case JumpKind::kBackward:
              item.arg = after >= to ? after - to : 0;
              break;
            case JumpKind::kAbsolute:
              item.arg = to;
              break;
            case JumpKind::kNone:
              break;
          }
        }
        const int prefixes = item.arg > 0xFFFFFF ? 3
                             : item.arg > 0xFFFF ? 2
                             : item.arg > 0xFF   ? 1
                                                 : 0;
        if (prefixes != item.prefixes) {
          item.prefixes = prefixes;
          changed = true;
        }
      }
      if (!changed) break;
    }
  }

  void emit(std::string& code, const Item& item) const {
    const uint8_t extended = *table_.byte_of(Opcode::EXTENDED_ARG);
    for (int k = item.prefixes; k > 0; --k) {
      code.push_back(static_cast<char>(extended));
      code.push_back(static_cast<char>((item.arg >> (8 * k)) & 0xFF));
    }
    code.push_back(static_cast<char>(item.byte));
    code.push_back(static_cast<char>(item.arg & 0xFF));
    code.append(2 * size_t{table_[item.byte].cache_entries}, '\0');
  }

  // The prologue on the first line, then three instructions a line.
  std::string line_table() const {
    std::string table;
    append_line_entry(table, prologue_units(), 0);
    int line = shape_.firstlineno;
    for (size_t i = 0; i < items_.size(); ++i) {
      const int next = shape_.firstlineno + 1 + static_cast<int>(i / 3);
      append_line_entry(table, units_of(items_[i]), next - line);
      line = next;
    }
    return table;
  }

  std::string handlers() {
    struct Handler {
      size_t first, last, target;
      uint32_t depth;
      bool lasti;
    };
    std::vector<Handler> handlers;
    const size_t n = items_.size();
    while (handlers.size() < 8 && in_.left() >= 4) {
      Handler h{};
      h.first = in_.byte() % n;
      h.last = h.first + in_.byte() % (n - h.first);
      h.target = in_.byte() % n;
      const uint8_t d = in_.byte();
      h.depth = d & 7u;
      h.lasti = d & 8u;
      handlers.push_back(h);
    }
    std::stable_sort(handlers.begin(), handlers.end(),
                     [](const Handler& a, const Handler& b) { return a.first < b.first; });
    std::string table;
    for (const Handler& h : handlers) {
      const uint32_t start = starts_[h.first];
      const uint32_t end = starts_[h.last] + units_of(items_[h.last]);
      append_exception_entry(table, start, end - start, starts_[h.target], h.depth, h.lasti);
    }
    return table;
  }

  const CodeShape& shape_;
  ByteReader& in_;
  const OpcodeTable& table_;
  std::vector<uint8_t> vocabulary_;
  std::vector<Item> items_;
  std::vector<uint32_t> starts_;
  int depth_ = 0;
};

}  // namespace

GeneratedCode generate_code(const CodeShape& shape, ByteReader& in, size_t max_instructions,
                            bool terminate, bool exception_table) {
  return Generator(shape, in).run(max_instructions, terminate, exception_table);
}

}  // namespace dynvm::fuzz
