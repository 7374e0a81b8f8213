// libFuzzer target for the decoder: builds a RawCode from the input bytes, decodes it with
// its nested code objects, and formats every listing.
//
// Input layout, each field cut short where the input ends:
//   byte 0      bit 0: 3.12 (else 3.11); bit 1: CO_VARARGS; bit 2: CO_VARKEYWORDS
//   bytes 1-3   counts of constants, names and localsplus slots (each mod 32)
//   byte 4      argcount (low 3 bits), posonlyargcount (next 2), kwonlyargcount (next 2)
//   2 bytes     co_code length (little-endian), then co_code
//   1 byte      co_exceptiontable length, then the table
//   2 bytes     co_linetable length, then the table
//   n bytes     the localsplus kinds (missing ones are plain locals)
//   the rest    a nested code object in the same layout, as the last constant (3 deep)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/raw_code.h"

namespace {

using dynvm::frontend::BigInt;
using dynvm::frontend::Constant;
using dynvm::frontend::ConstantPtr;
using dynvm::frontend::RawCode;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t u16() {
    size_t low = byte();
    return low | size_t{byte()} << 8;
  }
  std::string bytes(size_t n) {
    n = std::min(n, size_ - std::min(pos_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

ConstantPtr make_constant(size_t i) {
  auto c = std::make_shared<Constant>();
  switch (i % 4) {
    case 0:
      break;  // None
    case 1:
      c->kind = Constant::Kind::Int;
      c->int_value = BigInt::from_int64(static_cast<int64_t>(i) * 1000003 - 7);
      break;
    case 2:
      c->kind = Constant::Kind::Str;
      c->bytes = "s" + std::to_string(i) + "'\"\n\xc3\xa9";
      break;
    default: {
      c->kind = Constant::Kind::Tuple;
      auto item = std::make_shared<Constant>();
      item->kind = Constant::Kind::Str;
      item->bytes = "k" + std::to_string(i);
      c->items.push_back(item);
      break;
    }
  }
  return c;
}

std::shared_ptr<RawCode> build(Input& in, int depth) {
  auto raw = std::make_shared<RawCode>();
  uint8_t flags = in.byte();
  raw->version = {3, (flags & 1) ? 12 : 11};
  raw->flags = (flags & 2 ? 0x4u : 0u) | (flags & 4 ? 0x8u : 0u);
  size_t nconsts = in.byte() % 32;
  size_t nnames = in.byte() % 32;
  size_t nlocals = in.byte() % 32;
  uint8_t counts = in.byte();
  raw->argcount = counts & 7;
  raw->posonlyargcount = (counts >> 3) & 3;
  raw->kwonlyargcount = (counts >> 5) & 3;
  raw->stacksize = 16;
  raw->name = raw->qualname = "fuzz" + std::to_string(depth);
  raw->filename = "fuzz.py";
  raw->firstlineno = 1;
  raw->code = in.bytes(in.u16());
  raw->exceptiontable = in.bytes(in.byte());
  raw->linetable = in.bytes(in.u16());
  for (size_t i = 0; i < nconsts; ++i) raw->consts.push_back(make_constant(i));
  for (size_t i = 0; i < nnames; ++i) raw->names.push_back("n" + std::to_string(i));
  for (size_t i = 0; i < nlocals; ++i) {
    raw->localsplusnames.push_back("l" + std::to_string(i));
    raw->localspluskinds.push_back(in.empty() ? 0x20 : in.byte());
  }
  if (!in.empty() && depth < 3) {
    auto nested = std::make_shared<Constant>();
    nested->kind = Constant::Kind::Code;
    nested->code = build(in, depth + 1);
    raw->consts.push_back(nested);
  }
  return raw;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  auto raw = build(in, 0);
  auto code = dynvm::frontend::decode_recursive(*raw);
  if (code.ok()) {
    (void)dynvm::frontend::format_dis_text(*code);
    (void)dynvm::frontend::format_dis_json(*code);
    (void)dynvm::frontend::format_normalized(*code);
  } else if (code.error().message.empty()) {
    __builtin_trap();  // every error says what went wrong
  }
  return 0;
}
