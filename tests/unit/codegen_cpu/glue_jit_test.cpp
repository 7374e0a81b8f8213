// The glue JIT: programs parsed from text, compiled, and run on arrays the test controls —
// every op's meaning, failure codes in order, helpers called with their arguments.
#include <cstdint>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/glue_ir_parser.h"
#include "dynvm/codegen/glue_jit.h"

using dynvm::codegen::compile_glue;
using dynvm::codegen::GlueFunction;
using dynvm::codegen::GlueProgram;
using dynvm::codegen::kGluePassed;
using dynvm::codegen::parse_glue_program;

namespace {

int64_t helper_calls = 0;

// sum of its arguments, counting the calls
int64_t add3(int64_t a, int64_t b, int64_t c) {
  ++helper_calls;
  return a + b + c;
}

GlueFunction compile_text(const std::string& text,
                          const std::vector<const void*>& helper_addresses = {}) {
  auto program = parse_glue_program(text);
  REQUIRE(program);
  GlueProgram p = std::move(program).value();
  REQUIRE(p.helpers.size() == helper_addresses.size());
  for (size_t i = 0; i < helper_addresses.size(); ++i) p.helpers[i].address = helper_addresses[i];
  auto compiled = compile_glue(p);
  REQUIRE(compiled);
  REQUIRE(compiled->function != nullptr);
  return compiled->function;
}

}  // namespace

TEST_CASE("glue: loads, masks and compares, failing with the first failing check's code") {
  // params: [0] a pointer to a record {i64 tag, i32 small, i32 pad, i64 flags}, [1] a bound.
  GlueFunction f = compile_text(R"(glue record params 2 slots 1
  %rec = param 0
  %bound = param 1
  check_nonzero %rec else 0
  %tag = load %rec, 0
  %want = const 0x123456789abcdef0
  check_eq %tag, %want else 1
  %small = load32 %rec, 8
  check_ult %small, %bound else 2
  %flags = load %rec, 16
  %mask = const 4
  %bit = and %flags, %mask
  check_nonzero %bit else 3
  %forbidden = const 7
  check_ne %small, %forbidden else 4
  store 0, %small
end
)");
  struct Record {
    int64_t tag;
    uint32_t small;
    uint32_t pad;
    int64_t flags;
  };
  Record record{0x123456789abcdef0, 5, 0xffffffffu, 4 | 1};
  int64_t slots[1] = {-9};
  auto run = [&](const Record* r, int64_t bound) {
    int64_t params[2] = {static_cast<int64_t>(reinterpret_cast<intptr_t>(r)), bound};
    return f(params, slots);
  };
  CHECK(run(&record, 6) == kGluePassed);
  CHECK(slots[0] == 5);  // load32 zero-extends and ignores the neighbouring word
  CHECK(run(nullptr, 6) == 0);
  CHECK(run(&record, 5) == 2);             // unsigned: 5 < 5 fails
  CHECK(run(&record, -1) == kGluePassed);  // -1 is the largest unsigned bound
  record.flags = 3;
  CHECK(run(&record, 6) == 3);
  record.tag = 1;
  CHECK(run(&record, 6) == 1);  // the earlier check wins
  record = Record{0x123456789abcdef0, 7, 0, 4};
  CHECK(run(&record, 9) == 4);
}

TEST_CASE("glue: helpers are called through their addresses, only while checks hold") {
  GlueFunction f = compile_text(R"(glue calls params 3 slots 2
helper add3 3
  %a = param 0
  %b = param 1
  %c = param 2
  %sum = call add3(%a, %b, %c)
  store 1, %sum
  %ten = const 10
  check_eq %sum, %ten else 7
  %again = call add3(%sum, %sum, %a)
  store 0, %again
end
)",
                                {reinterpret_cast<const void*>(&add3)});
  int64_t slots[2] = {0, 0};
  int64_t ok[3] = {1, 2, 7};
  helper_calls = 0;
  CHECK(f(ok, slots) == kGluePassed);
  CHECK(helper_calls == 2);
  CHECK(slots[1] == 10);
  CHECK(slots[0] == 21);
  int64_t bad[3] = {1, 2, 3};
  helper_calls = 0;
  slots[0] = 0;
  CHECK(f(bad, slots) == 7);
  CHECK(helper_calls == 1);  // stopped at the failing check
  CHECK(slots[0] == 0);
  CHECK(slots[1] == 6);
}

namespace {

// Writes `count` words 100, 101, ... from `where` (an array of slots); 0 = success.
int64_t fill_words(int64_t where, int64_t count) {
  auto* words = reinterpret_cast<int64_t*>(static_cast<intptr_t>(where));
  for (int64_t i = 0; i < count; ++i) words[i] = 100 + i;
  return 0;
}

int64_t last_sum = 0;
// A helper called for its effect only: returns nothing.
void sum_words(int64_t where, int64_t count) {
  auto* words = reinterpret_cast<const int64_t*>(static_cast<intptr_t>(where));
  last_sum = 0;
  for (int64_t i = 0; i < count; ++i) last_sum += words[i];
}

}  // namespace

TEST_CASE("glue: slot_addr hands helpers an array of slots to fill and read") {
  GlueFunction f = compile_text(
      R"(glue arrays params 0 slots 4
helper fill_words 2
helper sum_words 2
  %at = slot_addr 1
  %three = const 3
  %rc = call fill_words(%at, %three)
  %zero = const 0
  check_eq %rc, %zero else 0
  %first = load %at, 8
  store 0, %first
  %ignored = call sum_words(%at, %three)
end
)",
      {reinterpret_cast<const void*>(&fill_words), reinterpret_cast<const void*>(&sum_words)});
  int64_t slots[4] = {0, 0, 0, 0};
  last_sum = 0;
  CHECK(f(nullptr, slots) == kGluePassed);
  CHECK(slots[1] == 100);
  CHECK(slots[2] == 101);
  CHECK(slots[3] == 102);
  CHECK(slots[0] == 101);  // loaded back through the address
  CHECK(last_sum == 303);
}

TEST_CASE("glue: a program without checks always passes; invalid programs are refused") {
  GlueFunction f = compile_text("glue empty params 0 slots 0\nend\n");
  CHECK(f(nullptr, nullptr) == kGluePassed);

  GlueProgram broken;
  broken.name = "broken";
  broken.param_count = 1;
  int p = broken.param(3);  // out of range
  broken.check_nonzero(p, 0);
  auto compiled = compile_glue(broken);
  REQUIRE_FALSE(compiled);
  CHECK(compiled.error().message.find("invalid glue program broken") != std::string::npos);
}

TEST_CASE("glue: the LLVM IR before optimization is independent of the process") {
  auto program = parse_glue_program(R"(glue shape params 1 slots 0
helper probe 1
  %p = param 0
  %t = load %p, 8
  %r = call probe(%t)
  check_nonzero %r else 2
end
)");
  REQUIRE(program);
  auto ir = dynvm::codegen::glue_llvm_ir(*program);
  REQUIRE(ir);
  CHECK(ir->find("define i64 @shape(ptr noalias %params, ptr noalias %slots)") !=
        std::string::npos);
  CHECK(ir->find("declare i64 @probe(i64)") != std::string::npos);
  CHECK(ir->find("br i1") != std::string::npos);
  CHECK(ir->find("!prof") != std::string::npos);  // failure paths are marked unlikely
  CHECK(ir->find("ret i64 -1") != std::string::npos);
}
