// decode(): instructions, resolved arguments, normalised ops that mean the same in 3.11
// and 3.12, 3.13 decoded for listings only, errors on malformed code, and every fixture
// code object decoding cleanly.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/normalize.h"
#include "dynvm/frontend/pyc_file.h"
#include "test_support.h"

using namespace dynvm::frontend;
using dynvm::frontend::testing::CodeBuilder;
using dynvm::frontend::testing::data_path;

namespace {

constexpr PythonVersion k311{3, 11};
constexpr PythonVersion k312{3, 12};
constexpr PythonVersion k313{3, 13};

CodeInfo decode_ok(const RawCode& raw) {
  auto code = decode(raw);
  if (!code.ok()) FAIL(code.error().message);
  return std::move(*code);
}

// 3.13 code, which only listings decode.
CodeInfo decode_listing_ok(const RawCode& raw) {
  auto code = decode_recursive(raw);
  if (!code.ok()) FAIL(code.error().message);
  return std::move(*code);
}

std::string decode_error(const RawCode& raw) {
  auto code = decode(raw);
  REQUIRE_FALSE(code.ok());
  return code.error().message;
}

// The normalised ops without the Nops, as "Op arg index flags" strings.
std::vector<std::string> ops_of(const CodeInfo& code) {
  std::vector<std::string> out;
  for (const auto& ins : code.instructions) {
    if (ins.norm.op == Op::Nop) continue;
    out.push_back(std::string(op_name(ins.norm.op)) + " " + std::to_string(ins.norm.arg) + " " +
                  std::to_string(ins.norm.index) + " " + std::to_string(ins.norm.flags));
  }
  return out;
}

// a.x + g(b, k=1) in a function of (a, b).
CodeBuilder call_example(PythonVersion v) {
  CodeBuilder b(v);
  b.none_constant().int_constant(1);
  auto kwnames = std::make_shared<Constant>();
  kwnames->kind = Constant::Kind::Tuple;
  auto k = std::make_shared<Constant>();
  k->kind = Constant::Kind::Str;
  k->bytes = "k";
  kwnames->items.push_back(k);
  b.constant(kwnames);
  b.name("x").name("g");
  b.local("a").local("b");
  b.raw().argcount = 2;
  b.op("RESUME", 0);
  b.op("LOAD_FAST", 0);
  b.op("LOAD_ATTR", 0);
  b.op("LOAD_GLOBAL", 1 << 1 | 1);
  b.op("LOAD_FAST", 1);
  b.op("LOAD_CONST", 1);
  b.op("KW_NAMES", 2);
  if (v == k311) b.op("PRECALL", 2);
  b.op("CALL", 2);
  b.op("BINARY_OP", 0);
  b.op("RETURN_VALUE");
  return b;
}

}  // namespace

TEST_CASE("3.11: caches are skipped and arguments resolved") {
  CodeInfo code = decode_ok(call_example(k311).build());
  REQUIRE(code.instructions.size() == 11);
  std::vector<uint32_t> offsets;
  for (const auto& ins : code.instructions) offsets.push_back(ins.offset);
  CHECK(offsets == std::vector<uint32_t>{0, 2, 4, 14, 26, 28, 30, 32, 36, 46, 50});
  const Instruction& load_attr = code.instructions[2];
  CHECK(load_attr.opcode == Opcode::LOAD_ATTR);
  CHECK(load_attr.size == 5);
  CHECK(load_attr.index == 0);
  const Instruction& load_global = code.instructions[3];
  CHECK(load_global.index == 1);
  CHECK(load_global.arg_flags == kArgPushNull);
  CHECK(dis_argrepr(code, load_global) == "NULL + g");
  CHECK(code.instructions[9].binary_op() == BinaryOp::NB_ADD);
  CHECK(code.code_units == 26);
  CHECK(code.varnames == std::vector<int32_t>{0, 1});
}

TEST_CASE("the same source normalises to the same ops in 3.11 and 3.12") {
  CodeInfo c311 = decode_ok(call_example(k311).build());
  CodeInfo c312 = decode_ok(call_example(k312).build());
  const std::vector<std::string> expected = {
      "Resume 0 -1 0",   "LoadFast 0 0 0", "LoadAttr 0 0 0",  "LoadGlobal 0 1 1", "LoadFast 0 1 0",
      "LoadConst 0 1 0", "Call 2 2 0",     "BinaryOp 0 -1 0", "Return 0 -1 0"};
  CHECK(ops_of(c311) == expected);
  CHECK(ops_of(c312) == expected);
  // A call resumes at its KW_NAMES: the keyword names live in the evaluator, not the stack.
  const Instruction& call311 = c311.instructions[8];
  CHECK(call311.opcode == Opcode::CALL);
  CHECK(call311.norm.resume_index == 6);
  CHECK(c311.instructions[7].norm.op == Op::Nop);  // PRECALL
  const Instruction& call312 = c312.instructions[7];
  CHECK(call312.norm.resume_index == 6);
}

TEST_CASE("method loads: 3.11 LOAD_METHOD and 3.12 LOAD_ATTR's low bit") {
  CodeBuilder b11(k311), b12(k312);
  for (CodeBuilder* b : {&b11, &b12}) b->name("append").local("xs");
  b11.op("LOAD_FAST", 0);
  b11.op("LOAD_METHOD", 0);
  b12.op("LOAD_FAST", 0);
  b12.op("LOAD_ATTR", 0 << 1 | 1);
  for (CodeBuilder* b : {&b11, &b12}) b->op("RETURN_VALUE");
  CodeInfo c11 = decode_ok(b11.build());
  CodeInfo c12 = decode_ok(b12.build());
  CHECK(c11.instructions[1].norm.op == Op::LoadAttr);
  CHECK(c11.instructions[1].norm.flags == kOpMethod);
  CHECK(c12.instructions[1].norm.op == Op::LoadAttr);
  CHECK(c12.instructions[1].norm.flags == kOpMethod);
  CHECK(c12.instructions[1].norm.index == 0);
  CHECK(dis_argrepr(c11, c11.instructions[1]) == "append");
  CHECK(dis_argrepr(c12, c12.instructions[1]) == "NULL|self + append");
}

TEST_CASE("3.12 LOAD_SUPER_ATTR, COMPARE_OP, RETURN_CONST and intrinsics") {
  CodeBuilder b(k312);
  b.name("a").name("__init__").none_constant();
  b.op("LOAD_SUPER_ATTR", 1 << 2 | 3);  // 0
  b.op("LOAD_SUPER_ATTR", 1 << 2 | 0);  // 1
  b.op("COMPARE_OP", 2 << 4 | 0xb);     // 2: ==, low bits a specialisation mask
  b.op("CALL_INTRINSIC_1", 5);          // 3: unary +
  b.op("CALL_INTRINSIC_1", 6);          // 4: list -> tuple
  b.op("CALL_INTRINSIC_1", 3);          // 5: StopIteration -> RuntimeError
  b.op("CALL_INTRINSIC_2", 1);          // 6: except* re-raise
  b.op("RETURN_CONST", 0);              // 7
  CodeInfo code = decode_ok(b.build());
  const auto& ins = code.instructions;
  CHECK(ins[0].norm.op == Op::LoadSuperAttr);
  CHECK(ins[0].norm.index == 1);
  CHECK(ins[0].norm.flags == (kOpMethod | kOpTwoArgSuper));
  CHECK(dis_argrepr(code, ins[0]) == "NULL|self + __init__");
  CHECK(ins[1].norm.flags == 0);
  CHECK(ins[2].compare_op() == CompareOp::EQ);
  CHECK(ins[2].norm.op == Op::CompareOp);
  CHECK(ins[2].norm.arg == static_cast<int>(CompareOp::EQ));
  CHECK(dis_argrepr(code, ins[2]) == "==");
  CHECK(ins[3].norm.op == Op::UnaryPositive);
  CHECK(ins[4].norm.op == Op::ListToTuple);
  CHECK(ins[5].norm.op == Op::CallIntrinsic1);
  CHECK(ins[5].norm.arg == static_cast<int>(Intrinsic1::INTRINSIC_STOPITERATION_ERROR));
  CHECK(dis_argrepr(code, ins[5]) == "INTRINSIC_STOPITERATION_ERROR");
  CHECK(ins[6].norm.op == Op::PrepReraiseStar);
  CHECK(ins[7].norm.op == Op::Return);
  CHECK(ins[7].norm.index == 0);
}

TEST_CASE("for loops: 3.12's FOR_ITER exits past END_FOR, as 3.11's exits at its target") {
  CodeBuilder b11(k311);
  b11.none_constant().local("xs").local("x");
  b11.op("RESUME", 0);         // 0
  b11.op("LOAD_FAST", 0);      // 2
  b11.op("GET_ITER");          // 4
  b11.op("FOR_ITER", 2);       // 6 -> 12
  b11.op("STORE_FAST", 1);     // 8
  b11.op("JUMP_BACKWARD", 3);  // 10 -> 6
  b11.op("LOAD_CONST", 0);     // 12
  b11.op("RETURN_VALUE");      // 14
  CodeInfo c11 = decode_ok(b11.build());
  CHECK(c11.instructions[3].jump_target == 6);
  CHECK(c11.instructions[3].jump_target_offset == 12);
  CHECK(c11.instructions[3].norm.target == 6);
  CHECK(c11.instructions[5].jump_target == 3);
  CHECK(c11.instructions[5].norm.flags == kOpBackward);
  CHECK(c11.instructions[3].is_jump_target);
  CHECK(c11.instructions[6].is_jump_target);

  CodeBuilder b12(k312);
  b12.none_constant().local("xs").local("x");
  b12.op("RESUME", 0);         // 0
  b12.op("LOAD_FAST", 0);      // 2
  b12.op("GET_ITER");          // 4
  b12.op("FOR_ITER", 2);       // 6 (+1 cache) -> 14
  b12.op("STORE_FAST", 1);     // 10
  b12.op("JUMP_BACKWARD", 4);  // 12 -> 6
  b12.op("END_FOR");           // 14
  b12.op("RETURN_CONST", 0);   // 16
  CodeInfo c12 = decode_ok(b12.build());
  const Instruction& for_iter = c12.instructions[3];
  CHECK(for_iter.jump_target == 6);
  CHECK(for_iter.jump_target_offset == 14);
  CHECK(dis_argrepr(c12, for_iter) == "to 14");
  CHECK(for_iter.norm.target == 7);
  CHECK(c12.instructions[5].jump_target == 3);

  SECTION("a 3.12 FOR_ITER that does not jump to END_FOR is rejected") {
    CodeBuilder bad(k312);
    bad.none_constant();
    bad.op("FOR_ITER", 0);  // -> the RETURN_CONST right after
    bad.op("RETURN_CONST", 0);
    CHECK(decode_error(bad.build()) ==
          "code object 'f' (test.py): FOR_ITER does not jump to END_FOR at offset 0");
  }
}

TEST_CASE("EXTENDED_ARG folds into the next instruction, which resumes at the prefix") {
  CodeBuilder b(k311);
  for (int i = 0; i < 301; ++i) b.int_constant(i);
  b.op("LOAD_CONST", 300);  // EXTENDED_ARG 1; LOAD_CONST 44
  b.op("RETURN_VALUE");
  CodeInfo code = decode_ok(b.build());
  REQUIRE(code.instructions.size() == 3);
  CHECK(code.instructions[0].opcode == Opcode::EXTENDED_ARG);
  CHECK(code.instructions[0].arg == 1);
  CHECK(code.instructions[0].norm.op == Op::Nop);
  CHECK(code.instructions[1].arg == 300);
  CHECK(code.instructions[1].index == 300);
  CHECK(code.instructions[1].offset == 2);
  CHECK(code.instructions[1].norm.resume_index == 0);
  CHECK(dis_argrepr(code, code.instructions[1]) == "300");

  SECTION("three prefixes") {
    CodeBuilder wide(k311);
    wide.op("NOP");
    wide.unit(144, 0x01);  // EXTENDED_ARG
    wide.unit(144, 0x00);
    wide.unit(144, 0x00);
    wide.unit(110, 0x05);  // JUMP_FORWARD 0x01000005: far outside the code
    auto message = decode_error(wide.build());
    CHECK(message.find("JUMP_FORWARD jumps to offset 33554452, outside the code at offset 8") !=
          std::string::npos);
  }
}

TEST_CASE("specialised and instrumented opcodes decode as their base") {
  CodeBuilder b11(k311);
  b11.name("x").local("a").local("b");
  b11.unit(dynvm::frontend::testing::opcode_byte(k311, "LOAD_FAST__LOAD_FAST"), 0);
  b11.op("LOAD_FAST", 1);
  b11.unit(dynvm::frontend::testing::opcode_byte(k311, "LOAD_ATTR_INSTANCE_VALUE"), 0);
  for (int i = 0; i < 4; ++i) b11.unit(0x11, 0x22);  // caches hold counters when quickened
  b11.op("RETURN_VALUE");
  CodeInfo c11 = decode_ok(b11.build());
  REQUIRE(c11.instructions.size() == 4);
  CHECK(c11.instructions[0].opcode == Opcode::LOAD_FAST);
  CHECK(c11.instructions[2].opcode == Opcode::LOAD_ATTR);
  CHECK(c11.instructions[2].code_byte != *opcode_table(k311).byte_of(Opcode::LOAD_ATTR));
  CHECK(c11.instructions[3].offset == 14);

  CodeBuilder b12(k312);
  b12.unit(dynvm::frontend::testing::opcode_byte(k312, "INSTRUMENTED_CALL"), 0);
  for (int i = 0; i < 3; ++i) b12.unit(0, 0);
  b12.op("RETURN_VALUE");
  CodeInfo c12 = decode_ok(b12.build());
  CHECK(c12.instructions[0].opcode == Opcode::CALL);
  CHECK(c12.instructions[0].size == 4);
  CHECK(c12.instructions[1].offset == 8);

  CodeBuilder line(k312);
  line.unit(dynvm::frontend::testing::opcode_byte(k312, "INSTRUMENTED_LINE"), 0);
  CHECK(decode_error(line.build()).find("INSTRUMENTED_LINE") != std::string::npos);
}

TEST_CASE("locals, cells and free variables from the localsplus kinds") {
  CodeBuilder b(k312);
  b.local("a", kLocalKindLocal)
      .local("c", kLocalKindLocal | kLocalKindCell)
      .local("tmp", kLocalKindLocal | kLocalKindHidden)
      .local("cell", kLocalKindCell)
      .local("free", kLocalKindFree);
  b.raw().argcount = 2;
  b.raw().flags = kCoOptimized | kCoNewLocals | kCoNested;
  b.op("LOAD_DEREF", 4);
  b.op("RETURN_VALUE");
  CodeInfo code = decode_ok(b.build());
  CHECK(code.varnames == std::vector<int32_t>{0, 1, 2});
  CHECK(code.cellvars == std::vector<int32_t>{1, 3});
  CHECK(code.freevars == std::vector<int32_t>{4});
  CHECK(code.localsplus[2].is_hidden());
  CHECK(code.total_argcount() == 2);
  CHECK(code.instructions[0].index == 4);
  CHECK(code.local_name(4) == "free");
  CHECK(dis_argrepr(code, code.instructions[0]) == "free");
}

TEST_CASE("malformed code gives errors naming the problem and the offset") {
  auto expect = [](CodeBuilder& b, const std::string& message) {
    CHECK(decode_error(b.build()) == "code object 'f' (test.py): " + message);
  };
  CodeBuilder b(k311);
  SECTION("invalid opcode") {
    b.op("NOP");
    b.unit(0xfe, 0);
    expect(b, "invalid opcode 254 at offset 2");
  }
  SECTION("odd length") {
    b.raw().code = std::string("\x09\x00\x09", 3);
    expect(b, "co_code has an odd length (3 bytes)");
  }
  SECTION("truncated caches") {
    b.name("x");
    b.op("LOAD_GLOBAL", 0);
    b.raw().code.resize(6);
    expect(b, "code ends inside the inline caches of LOAD_GLOBAL at offset 0");
  }
  SECTION("EXTENDED_ARG at the end") {
    b.op("NOP");
    b.unit(144, 1);
    expect(b, "EXTENDED_ARG is the last instruction at offset 2");
  }
  SECTION("stray CACHE") {
    b.unit(0, 0);
    expect(b, "CACHE entry outside any instruction's inline caches at offset 0");
  }
  SECTION("jump outside the code") {
    b.op("JUMP_FORWARD", 3);
    b.op("NOP");
    expect(b, "JUMP_FORWARD jumps to offset 8, outside the code at offset 0");
  }
  SECTION("jump backward before the start") {
    b.op("NOP");
    b.op("JUMP_BACKWARD", 5);
    expect(b, "JUMP_BACKWARD jumps to offset -6, outside the code at offset 2");
  }
  SECTION("jump into caches") {
    b.name("x");
    b.op("JUMP_FORWARD", 1);  // -> offset 4, inside LOAD_GLOBAL's caches
    b.op("LOAD_GLOBAL", 0);
    expect(b, "JUMP_FORWARD jumps to offset 4, which is not an instruction boundary at offset 0");
  }
  SECTION("constant index out of range") {
    b.none_constant();
    b.op("LOAD_CONST", 1);
    expect(b, "LOAD_CONST: index 1 out of range for co_consts (size 1) at offset 0");
  }
  SECTION("name index out of range (after LOAD_GLOBAL's flag bit)") {
    b.name("x");
    b.op("LOAD_GLOBAL", 2 << 1 | 1);
    expect(b, "LOAD_GLOBAL: index 2 out of range for co_names (size 1) at offset 0");
  }
  SECTION("local index out of range") {
    b.op("LOAD_FAST", 0);
    expect(b, "LOAD_FAST: index 0 out of range for co_localsplusnames (size 0) at offset 0");
  }
  SECTION("comparison out of range") {
    b.op("COMPARE_OP", 6);
    expect(b, "COMPARE_OP: index 6 out of range for the comparison operators (size 6) at offset 0");
  }
  SECTION("binary operator out of range") {
    b.op("BINARY_OP", 26);
    expect(b, "BINARY_OP: index 26 out of range for the binary operators (size 26) at offset 0");
  }
  SECTION("kinds and names disagree") {
    b.raw().localsplusnames = {"a", "b"};
    b.raw().localspluskinds = {kLocalKindLocal};
    expect(b, "co_localsplusnames has 2 names but co_localspluskinds 1 kinds");
  }
  SECTION("a free variable that is also a local") {
    // Found by fuzz/trace_fuzzer.cpp: CPython gives a function of this code no cell for the
    // slot, and the tracer read past the end of the closure looking for one.
    b.raw().localsplusnames = {"a", "b"};
    b.raw().localspluskinds = {kLocalKindLocal, kLocalKindLocal | kLocalKindFree};
    expect(b,
           "localsplus slot 1 ('b') is a free variable and also a local or cell variable "
           "(kind 160)");
  }
  SECTION("a free variable that is also a cell") {
    b.raw().localsplusnames = {"c"};
    b.raw().localspluskinds = {kLocalKindCell | kLocalKindFree};
    expect(b,
           "localsplus slot 0 ('c') is a free variable and also a local or cell variable "
           "(kind 192)");
  }
  SECTION("more arguments than locals") {
    b.raw().argcount = 1;
    expect(b, "more arguments (1) than local variables (0)");
  }
  SECTION("unsupported version") {
    b.raw().version = {3, 10};
    CHECK(decode_error(b.build()) ==
          "code object 'f': the VM executes bytecode of Python 3.11 and 3.12, not 3.10");
    auto listing = decode_recursive(b.build());
    REQUIRE_FALSE(listing.ok());
    CHECK(listing.error().message ==
          "code object 'f': unsupported Python version 3.10 (dynvm reads 3.11, 3.12 and 3.13)");
  }
}

TEST_CASE("3.13: malformed arguments of its new instructions") {
  CodeBuilder b(k313);
  b.local("a").local("b");
  auto expect = [&b](const std::string& message) {
    auto code = decode_recursive(b.build());
    REQUIRE_FALSE(code.ok());
    CHECK(code.error().message == "code object 'f' (test.py): " + message);
  };
  SECTION("second local of a pair") {
    b.op("LOAD_FAST_LOAD_FAST", 0 << 4 | 2);
    expect("LOAD_FAST_LOAD_FAST: index 2 out of range for co_localsplusnames (size 2) at offset 0");
  }
  SECTION("first local of a pair") {
    b.op("STORE_FAST_STORE_FAST", 3 << 4 | 1);
    expect(
        "STORE_FAST_STORE_FAST: index 3 out of range for co_localsplusnames (size 2) at offset 0");
  }
  SECTION("conversion") {
    b.op("CONVERT_VALUE", 4);
    expect("CONVERT_VALUE: index 4 out of range for the conversions (size 4) at offset 0");
  }
  SECTION("comparison") {
    b.op("COMPARE_OP", 6 << 5 | 16);
    expect("COMPARE_OP: index 6 out of range for the comparison operators (size 6) at offset 0");
  }
  SECTION("an executor's instruction") {
    b.op("ENTER_EXECUTOR", 0);
    expect("ENTER_EXECUTOR (code that runs an executor must be read through co_code) at offset 0");
  }
}

TEST_CASE("3.13: listings decode it, the VM refuses it") {
  CodeBuilder b(k313);
  b.none_constant().name("print").name("m").local("a").local("b");
  b.raw().argcount = 2;
  b.op("RESUME", 0);
  b.op("LOAD_FAST_LOAD_FAST", 0 << 4 | 1);
  b.op("STORE_FAST_STORE_FAST", 1 << 4 | 0);
  b.op("LOAD_GLOBAL", 0 << 1 | 1);
  b.op("LOAD_FAST", 0);
  b.op("LOAD_ATTR", 1 << 1 | 1);
  b.op("LOAD_FAST_LOAD_FAST", 0 << 4 | 1);
  b.op("COMPARE_OP", 0 << 5 | 16);
  b.op("POP_JUMP_IF_FALSE", 2);
  b.op("LOAD_FAST", 0);
  b.op("CONVERT_VALUE", 2);
  b.op("FORMAT_SIMPLE");
  b.op("TO_BOOL");
  b.op("JUMP_BACKWARD", 32);
  b.op("COMPARE_OP", 2 << 5);
  b.op("SET_FUNCTION_ATTRIBUTE", 8);
  b.op("CALL_KW", 1);
  b.op("RETURN_CONST", 0);

  CHECK(decode_error(b.build()) ==
        "code object 'f': the VM executes bytecode of Python 3.11 and 3.12, not 3.13 (dynvm dis "
        "lists it)");
  CHECK_FALSE(is_executable_version(k313));
  CHECK(is_supported_version(k313));

  CodeInfo code = decode_listing_ok(b.build());
  CHECK_FALSE(code.normalized);
  auto normalized = normalize(code);
  REQUIRE_FALSE(normalized.ok());
  CHECK(normalized.error().message ==
        "code object 'f': Python 3.13 bytecode has no normalised form (the VM executes 3.11 "
        "and 3.12)");
  CHECK(format_normalized(code) ==
        "not normalised: the VM does not execute Python 3.13 bytecode\n");
  std::vector<uint32_t> offsets;
  std::vector<std::string> reprs;
  for (const auto& ins : code.instructions) {
    offsets.push_back(ins.offset);
    reprs.push_back(dis_argrepr(code, ins));
  }
  // Caches: LOAD_GLOBAL 4, LOAD_ATTR 9, COMPARE_OP 1, POP_JUMP_IF_FALSE 1, TO_BOOL 3,
  // JUMP_BACKWARD 1.
  CHECK(offsets ==
        std::vector<uint32_t>{0, 2, 4, 6, 16, 18, 38, 40, 44, 48, 50, 52, 54, 62, 66, 70, 72, 74});
  CHECK(reprs == std::vector<std::string>{"", "a, b", "b, a", "print + NULL", "a", "m + NULL|self",
                                          "a, b", "bool(<)", "to L2", "a", "repr", "", "", "to L1",
                                          "==", "closure", "", "None"});
  const Instruction& pair = code.instructions[2];
  CHECK(pair.opcode == Opcode::STORE_FAST_STORE_FAST);
  CHECK(pair.arg_kind == ArgKind::kLocalPair);
  CHECK(pair.index == 1);
  CHECK(pair.second_index() == 0);
  CHECK(code.instructions[1].second_index() == 1);
  CHECK(code.instructions[4].second_index() == -1);  // a plain local
  const Instruction& compare = code.instructions[7];
  CHECK(compare.compare_op() == CompareOp::LT);
  CHECK(compare.arg_flags == kArgToBool);
  CHECK(code.instructions[14].compare_op() == CompareOp::EQ);
  CHECK(code.instructions[14].arg_flags == 0);
  CHECK(code.instructions[3].arg_flags == kArgPushNull);
  CHECK(code.instructions[5].arg_flags == kArgMethod);
  CHECK(code.instructions[5].index == 1);
  CHECK(code.instructions[10].arg_value == 2);  // CONVERT_VALUE repr
  // Jump targets are numbered in offset order; 3.13's dis calls them L1, L2.
  CHECK(code.instructions[8].jump_target == 11);
  CHECK(code.instructions[13].jump_target == 1);
  CHECK(code.instructions[1].label == 1);
  CHECK(code.instructions[11].label == 2);
  CHECK(code.instructions[0].label == 0);

  // The same instructions read as 3.12 bytes would mean something else: the tables differ.
  CHECK(opcode_table(k313).byte_of(Opcode::TO_BOOL) == 40);
  CHECK_FALSE(opcode_table(k312).byte_of(Opcode::TO_BOOL).has_value());
}

TEST_CASE("decode_recursive normalises the versions the VM executes") {
  for (PythonVersion v : {k311, k312}) {
    CodeInfo code = decode_listing_ok(call_example(v).build());
    CHECK(code.normalized);
    CHECK(decode_ok(call_example(v).build()).normalized);
    CHECK(is_executable_version(v));
  }
  CHECK_FALSE(is_executable_version({3, 10}));
}

TEST_CASE("nested code objects decode recursively, within a depth limit") {
  auto make = [](int depth) {
    CodeBuilder leaf(k311);
    leaf.op("NOP");
    auto inner = std::make_shared<RawCode>(leaf.build());
    for (int i = 0; i < depth; ++i) {
      CodeBuilder outer(k311);
      auto c = std::make_shared<Constant>();
      c->kind = Constant::Kind::Code;
      c->code = inner;
      outer.none_constant().constant(c);
      outer.op("NOP");
      inner = std::make_shared<RawCode>(outer.build());
    }
    return inner;
  };
  auto shallow = decode_recursive(*make(3));
  REQUIRE(shallow.ok());
  REQUIRE(shallow->nested.size() == 1);
  CHECK(shallow->nested[0].const_index == 1);
  CHECK(shallow->nested[0].code->nested.size() == 1);
  auto deep = make(250);
  CHECK(decode(*deep).ok());
  auto too_deep = decode_recursive(*deep);
  REQUIRE_FALSE(too_deep.ok());
  CHECK(too_deep.error().message.find("nested more than 200 deep") != std::string::npos);
}

TEST_CASE("random code never crashes the decoder") {
  std::mt19937 rng(12345);
  int decoded = 0;
  int decoded_313 = 0;
  for (int round = 0; round < 4500; ++round) {
    const PythonVersion version = round % 3 == 2 ? k313 : round % 3 == 1 ? k312 : k311;
    CodeBuilder b(version);
    b.none_constant().int_constant(1).name("n").local("l");
    std::string& code = b.raw().code;
    size_t units = rng() % 24;
    for (size_t i = 0; i < units; ++i) {
      // Mostly assigned opcodes with small arguments, so that decoding often succeeds.
      auto byte = static_cast<uint8_t>(rng() % 256);
      if (rng() % 8 && !opcode_table(version)[byte].valid) {
        byte = *opcode_table(version).byte_of(Opcode::NOP);
      }
      code += static_cast<char>(byte);
      code += static_cast<char>(rng() % 8 ? rng() % 2 : rng() % 256);
    }
    if (rng() % 4 == 0) {
      for (size_t i = rng() % 6; i > 0; --i) b.raw().exceptiontable += static_cast<char>(rng());
    }
    if (rng() % 4 == 0) {
      for (size_t i = rng() % 6; i > 0; --i) b.raw().linetable += static_cast<char>(rng());
    }
    auto result = version == k313 ? decode_recursive(b.build()) : decode(b.build());
    if (result.ok()) {
      ++decoded;
      if (version == k313) ++decoded_313;
      for (const auto& ins : result->instructions) {
        CHECK(ins.norm.resume_index <= static_cast<int32_t>(&ins - &result->instructions[0]));
        CHECK(ins.norm.target < static_cast<int32_t>(result->instructions.size()));
      }
      (void)format_dis_text(*result);
      (void)format_dis_json(*result);
    } else {
      CHECK_FALSE(result.error().message.empty());
    }
  }
  CHECK(decoded > 50);
  CHECK(decoded_313 > 15);
}

TEST_CASE("every fixture code object decodes and normalises consistently") {
  std::vector<std::string> files;
  for (const auto& dir :
       {data_path("decode/py311"), data_path("py312/pyc"), data_path("py313/pyc")}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".pyc") files.push_back(entry.path().string());
    }
  }
  REQUIRE(files.size() >= 60);
  size_t instructions = 0;
  for (const auto& file : files) {
    INFO(file);
    auto pyc = read_pyc_file(file);
    REQUIRE(pyc.ok());
    auto module = decode_recursive(*pyc->code);
    if (!module.ok()) FAIL(module.error().message);
    std::vector<const CodeInfo*> stack = {&*module};
    while (!stack.empty()) {
      const CodeInfo& code = *stack.back();
      stack.pop_back();
      for (const auto& nested : code.nested) stack.push_back(nested.code.get());
      const auto count = static_cast<int32_t>(code.instructions.size());
      CHECK(code.normalized == (code.version.minor < 13));
      int32_t last_label = 0;
      for (int32_t i = 0; i < count; ++i) {
        const Instruction& ins = code.instructions[static_cast<size_t>(i)];
        ++instructions;
        if (ins.is_jump_target) CHECK(ins.label == ++last_label);
        if (ins.arg_kind == ArgKind::kJump) CHECK(ins.jump_target >= 0);
        if (!code.normalized) continue;
        CHECK(ins.norm.resume_index <= i);
        CHECK(ins.norm.resume_index >= 0);
        CHECK(ins.norm.target < count);
        if (ins.arg_kind == ArgKind::kJump) CHECK(ins.norm.target >= 0);
        if (code.version.minor == 12 && ins.norm.op == Op::Send) {
          CHECK(code.instructions[static_cast<size_t>(ins.norm.target - 1)].opcode ==
                Opcode::END_SEND);
        }
        if (ins.norm.op == Op::Call && ins.norm.index >= 0) {
          CHECK(code.instructions[static_cast<size_t>(ins.norm.resume_index)].opcode ==
                Opcode::KW_NAMES);
        }
      }
    }
  }
  CHECK(instructions > 200000);
}
