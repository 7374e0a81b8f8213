// libFuzzer entry point: arbitrary bytes through the .pyc reader and the marshal reader.
//
// Run: build-fuzz/fuzz/marshal_fuzzer CORPUS_DIR (fuzz/make_seed_corpus.sh fills one).
// Besides crashes and sanitizer reports, it fails on a read that succeeds but breaks the
// invariants later stages rely on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "dynvm/frontend/marshal_reader.h"
#include "dynvm/frontend/pyc_file.h"

namespace {

using dynvm::frontend::Constant;
using dynvm::frontend::ConstantPtr;
using dynvm::frontend::RawCode;

// repr() prints shared objects once per use, so its output can grow exponentially
// with nesting (as in Python), and int printing is quadratic: print only what stays
// small.
constexpr size_t kMaxReprBytes = size_t{1} << 20;
constexpr size_t kMaxIntDigits = 4000;

void require(bool condition) {
  if (!condition) std::abort();
}

class Walker {
 public:
  // An upper bound of repr(constant)'s length, saturating at kMaxReprBytes + 1.
  size_t repr_bound(const Constant& constant) {
    const auto memo = bounds_.find(&constant);
    if (memo != bounds_.end()) return memo->second;
    size_t bound = 64;
    switch (constant.kind) {
      case Constant::Kind::Int:
        bound = constant.int_value.digits15.size() > kMaxIntDigits
                    ? kMaxReprBytes + 1
                    : 32 + constant.int_value.digits15.size() * 5;
        break;
      case Constant::Kind::Str:
      case Constant::Kind::Bytes:
        bound = 3 + constant.bytes.size() * 10;
        break;
      case Constant::Kind::Tuple:
      case Constant::Kind::FrozenSet:
        bound = 16;
        for (const ConstantPtr& item : constant.items) {
          bound += 2 + repr_bound(*item);
          if (bound > kMaxReprBytes) break;
        }
        break;
      case Constant::Kind::Code:
        bound = 64 + constant.code->name.size() + constant.code->filename.size();
        break;
      default:
        break;
    }
    if (bound > kMaxReprBytes) bound = kMaxReprBytes + 1;
    bounds_.emplace(&constant, bound);
    return bound;
  }

  void visit(const ConstantPtr& constant) {
    require(constant != nullptr);
    if (!visited_.emplace(constant.get(), 0).second) return;
    if (repr_bound(*constant) <= kMaxReprBytes) require(!constant->repr().empty());
    for (const ConstantPtr& item : constant->items) visit(item);
    if (constant->kind == Constant::Kind::Code) visit_code(*constant->code);
  }

  void visit_code(const RawCode& code) {
    // What the marshal reader validates for the decoder.
    require(code.code.size() % 2 == 0);
    require(code.localsplusnames.size() == code.localspluskinds.size());
    require(code.argcount >= 0 && code.posonlyargcount <= code.argcount);
    for (const ConstantPtr& constant : code.consts) visit(constant);
  }

 private:
  std::unordered_map<const Constant*, size_t> bounds_;
  std::unordered_map<const Constant*, int> visited_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  auto pyc = dynvm::frontend::read_pyc_bytes(bytes);
  if (pyc) {
    require(pyc->code != nullptr);
    Walker().visit_code(*pyc->code);
  } else {
    require(!pyc.error().message.empty());
  }

  // The same bytes as bare marshal data, and as the marshal data of a .pyc body.
  for (const std::string_view marshal : {bytes, bytes.substr(bytes.size() >= 16 ? 16 : 0)}) {
    auto object = dynvm::frontend::read_marshal_object(marshal);
    if (object) {
      Walker().visit(*object);
    } else {
      require(object.error().message.rfind("bad marshal data at offset ", 0) == 0);
    }
  }
  return 0;
}
