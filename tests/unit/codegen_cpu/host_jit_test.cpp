// The host JIT links each object so that its code reaches its own constants wherever the
// process's other mappings put the memory it is given: code and constants of one object
// must not be mapped apart (RuntimeDyld did, and its 32-bit PC-relative loads then read
// the wrong memory once the two lay more than 2 GB apart).
#include <sys/mman.h>
#include <unistd.h>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "cpu/host_jit.h"

namespace dynvm::codegen {
namespace {

constexpr int64_t kTableSize = 256;  // 2 KB of constants: one page
constexpr int kPadding = 400;        // functions that make the code several pages long

int64_t table_value(int64_t object, int64_t index) { return object * 1000003 + index * 7; }

// A module whose function `name(i)` returns element i of a constant table of its own.
std::unique_ptr<llvm::Module> table_module(llvm::LLVMContext& context, const std::string& name,
                                           int64_t object, const llvm::TargetMachine& machine) {
  auto module = std::make_unique<llvm::Module>(name, context);
  module->setDataLayout(machine.createDataLayout());
  module->setTargetTriple(machine.getTargetTriple().str());
  auto* i64 = llvm::Type::getInt64Ty(context);
  std::vector<llvm::Constant*> values;
  for (int64_t i = 0; i < kTableSize; ++i) {
    values.push_back(llvm::ConstantInt::get(i64, static_cast<uint64_t>(table_value(object, i))));
  }
  auto* type = llvm::ArrayType::get(i64, kTableSize);
  auto* table = new llvm::GlobalVariable(*module, type, true, llvm::GlobalValue::PrivateLinkage,
                                         llvm::ConstantArray::get(type, values), name + "_table");
  auto* function = llvm::Function::Create(llvm::FunctionType::get(i64, {i64}, false),
                                          llvm::Function::ExternalLinkage, name, module.get());
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", function));
  llvm::Value* slot = b.CreateInBoundsGEP(type, table, {b.getInt64(0), function->getArg(0)});
  b.CreateRet(b.CreateLoad(i64, slot));
  // Code of several pages: functions that each return a value of their own.
  for (int k = 0; k < kPadding; ++k) {
    auto* pad = llvm::Function::Create(llvm::FunctionType::get(i64, {i64}, false),
                                       llvm::Function::ExternalLinkage,
                                       name + "_pad" + std::to_string(k), module.get());
    llvm::IRBuilder<> p(llvm::BasicBlock::Create(context, "entry", pad));
    llvm::Value* v = pad->getArg(0);
    for (int step = 1; step <= 4; ++step) {
      v = p.CreateXor(p.CreateMul(v, p.getInt64(2654435761ULL * (k + step))), p.getInt64(k));
    }
    p.CreateRet(v);
  }
  return module;
}

// Address space arranged so that a one-page block can only be found far above any larger
// one: every hole above a 3 GB reservation is filled, except single pages punched out of
// a filler. An object whose constants fit one page but whose code does not then has its
// code placed below the reservation and, were its sections mapped apart, its constants in
// a one-page hole 3 GB above it.
class SplitAddressSpace {
 public:
  SplitAddressSpace() {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // The comb first (it lands in the highest hole), the reservation below it.
    void* comb = mmap(nullptr, 64 * page_, PROT_NONE, kFlags, -1, 0);
    if (comb == MAP_FAILED) return;
    void* gap = mmap(nullptr, kGap, PROT_NONE, kFlags, -1, 0);
    if (gap == MAP_FAILED) return;
    blocks_.push_back({gap, kGap});
    auto low = reinterpret_cast<uintptr_t>(gap) + kGap;
    if (reinterpret_cast<uintptr_t>(comb) < low) {
      munmap(comb, 64 * page_);
      return;
    }
    std::FILE* maps = std::fopen("/proc/self/maps", "r");
    if (maps == nullptr) return;
    char line[512];
    std::vector<std::pair<uintptr_t, uintptr_t>> holes;
    uintptr_t previous = 0;
    while (std::fgets(line, sizeof line, maps) != nullptr) {
      unsigned long begin = 0, end = 0;
      if (std::sscanf(line, "%lx-%lx", &begin, &end) != 2) continue;
      if (std::strstr(line, "[stack]") != nullptr || std::strstr(line, "[v") != nullptr) break;
      if (previous >= low && begin > previous) holes.emplace_back(previous, begin);
      previous = end;
    }
    std::fclose(maps);
    for (auto [begin, end] : holes) fill(begin, end - begin);
    // Every other page of the comb back to the free pool.
    // (What lands in them later is not the test's to unmap.)
    for (size_t i = 0; i < 64; i += 2) {
      munmap(static_cast<char*>(comb) + i * page_, page_);
      blocks_.push_back({static_cast<char*>(comb) + (i + 1) * page_, page_});
    }
    ready_ = true;
  }
  ~SplitAddressSpace() {
    for (auto [address, size] : blocks_) munmap(address, size);
  }
  bool ready() const { return ready_; }

 private:
  static constexpr size_t kGap = size_t{3} << 30;
  static constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void fill(uintptr_t begin, size_t size) {
    void* at =
        mmap(reinterpret_cast<void*>(begin), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (at != MAP_FAILED) blocks_.push_back({at, size});
  }
  size_t page_ = 4096;
  bool ready_ = false;
  std::vector<std::pair<void*, size_t>> blocks_;
};

TEST_CASE("an object's code reads its own constants wherever its memory is mapped", "[host_jit]") {
  HostJit& host = host_jit();
  REQUIRE(host.error.empty());  // these tests are built only with LLVM
  std::lock_guard<std::mutex> lock(host.mutex);
  llvm::LLVMContext context;
  using Read = int64_t (*)(int64_t);
  std::vector<Read> reads;
  {
    SplitAddressSpace split;
    REQUIRE(split.ready());
    for (int64_t object = 0; object < 4; ++object) {
      std::string name = "dynvm_test_table_" + std::to_string(host.next_library);
      auto module = table_module(context, name, object, *host.target_machine);
      REQUIRE(verify_module(*module).empty());
      auto bytes = emit_object(*module, *host.target_machine);
      REQUIRE(bytes.ok());
      auto loaded = load_object(host, *bytes, name);
      REQUIRE(loaded.ok());
      reads.push_back(reinterpret_cast<Read>(const_cast<void*>(loaded->address)));
    }
  }
  for (int64_t object = 0; object < 4; ++object) {
    for (int64_t i : {int64_t{0}, int64_t{1}, kTableSize / 2, kTableSize - 1}) {
      CHECK(reads[static_cast<size_t>(object)](i) == table_value(object, i));
    }
  }
}

}  // namespace
}  // namespace dynvm::codegen
