// The glue IR's text form and verifier: round trips, the printer against literal text,
// located parse errors, and the verifier's message for each kind of broken program.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/glue_ir.h"
#include "dynvm/codegen/glue_ir_parser.h"
#include "dynvm/codegen/glue_ir_verify.h"

namespace dynvm::codegen {
namespace {

GlueProgram parse_ok(const std::string& text) {
  Expected<GlueProgram> program = parse_glue_program(text);
  if (!program) FAIL("parse error: " << program.error().message << "\n" << text);
  return std::move(program).value();
}

std::string parse_error(const std::string& text) {
  Expected<GlueProgram> program = parse_glue_program(text);
  if (program) FAIL("parsed, but an error was expected:\n" << text);
  return program.error().message;
}

using Messages = std::vector<std::string>;

// Every op, both kinds of constant, a call without arguments and one with.
const char* kEveryOp = R"(glue every_op params 3 slots 2
helper tensor_matches 2
helper now 0
  %0 = param 0
  %1 = param 2
  %2 = const 0
  check_ult %2, %1 else 0
  %3 = load %0, 8
  %4 = load32 %3, 16
  %5 = const 255
  %6 = and %4, %5
  check_eq %6, %5 else 1
  check_ne %3, %2 else 2
  check_nonzero %4 else 3
  %7 = const 0x7f3a10203040
  %8 = call tensor_matches(%7, %3)
  check_nonzero %8 else 4
  %9 = call now()
  store 0, %8
  store 1, %9
  %10 = const 0xffffffffffffffff
  check_ne %9, %10 else 5
end
)";

TEST_CASE("glue IR: print(parse(text)) == text for every op", "[codegen][glue_ir]") {
  GlueProgram program = parse_ok(kEveryOp);
  CHECK(to_text(program) == kEveryOp);
  CHECK(verify_glue_program(program).empty());

  // What the parser built, field by field, for a few instructions.
  CHECK(program.name == "every_op");
  CHECK(program.param_count == 3);
  CHECK(program.slot_count == 2);
  REQUIRE(program.helpers.size() == 2);
  CHECK(program.helpers[0].name == "tensor_matches");
  CHECK(program.helpers[0].arity == 2);
  CHECK(program.helpers[0].address == nullptr);
  CHECK(program.helpers[1].arity == 0);
  CHECK(program.value_count() == 11);
  REQUIRE(program.body.size() == 19);
  CHECK(program.body[5].op == GlueOp::Load32);
  CHECK(program.body[5].operands == std::vector<int>{3});
  CHECK(program.body[5].immediate == 16);
  CHECK(program.body[11].op == GlueOp::Const);
  CHECK(program.body[11].immediate == 0x7f3a10203040);
  CHECK(program.body[12].op == GlueOp::Call);
  CHECK(program.body[12].helper == 0);
  CHECK(program.body[12].operands == std::vector<int>{7, 3});
  CHECK(program.body[15].op == GlueOp::Store);
  CHECK(program.body[15].immediate == 0);
  CHECK(program.body[15].operands == std::vector<int>{8});
  CHECK(program.body[17].immediate == -1);
  CHECK(program.body[18].op == GlueOp::CheckNe);
  CHECK(program.body[18].fail_code == 5);
}

TEST_CASE("glue IR: slot_addr prints, parses and is range-checked", "[codegen][glue_ir]") {
  const std::string text =
      "glue arrays params 0 slots 3\n"
      "helper fill 2\n"
      "  %0 = slot_addr 1\n"
      "  %1 = const 2\n"
      "  %2 = call fill(%0, %1)\n"
      "  check_nonzero %2 else 0\n"
      "end\n";
  GlueProgram program = parse_ok(text);
  CHECK(to_text(program) == text);
  CHECK(verify_glue_program(program).empty());
  REQUIRE(program.body.size() == 4);
  CHECK(program.body[0].op == GlueOp::SlotAddr);
  CHECK(program.body[0].immediate == 1);
  CHECK(program.body[0].defines_value());
  program.body[0].immediate = 3;
  CHECK(verify_glue_program(program) ==
        std::vector<std::string>{"instruction 0 (slot_addr): slot 3 is outside [0, 3)"});
}

TEST_CASE("glue IR: free value names are renumbered in definition order", "[codegen][glue_ir]") {
  const char* input = R"(
# a comment before the header
glue   renamed params 2 slots 1   # and after it
helper  same 1

  %args = param 1
  %mask = const 0x00ff   # hex in, decimal out
  %neg = const -2
  %big = const 65536
  %x = and %args, %mask
  %y = call same(%x)

  check_eq %y, %neg else 7
  store 0, %big
end

)";
  const char* expected = R"(glue renamed params 2 slots 1
helper same 1
  %0 = param 1
  %1 = const 255
  %2 = const 0xfffffffffffffffe
  %3 = const 0x10000
  %4 = and %0, %1
  %5 = call same(%4)
  check_eq %5, %2 else 7
  store 0, %3
end
)";
  CHECK(to_text(parse_ok(input)) == expected);
  CHECK(to_text(parse_ok(expected)) == expected);
}

TEST_CASE("glue IR: a program built with the builder prints as the header shows",
          "[codegen][glue_ir]") {
  GlueProgram program;
  program.name = "check_f";
  program.param_count = 8;
  program.slot_count = 2;
  int matches = program.add_helper("tensor_matches", 2, nullptr);
  int tuple = program.param(1);
  int size = program.param(2);
  int zero = program.constant(int64_t{0});
  program.check_ult(zero, size, 0);
  int item = program.load(tuple, 0);
  program.check_nonzero(item, 0);
  program.store(0, item);
  int type = program.load(item, 8);
  int expected_type = program.constant_address(reinterpret_cast<const void*>(0x7f3a10203040));
  program.check_eq(type, expected_type, 0);
  int ok = program.call(matches, {expected_type, item});
  program.check_nonzero(ok, 1);
  // Adding a helper again finds the first one.
  CHECK(program.add_helper("tensor_matches", 2, nullptr) == matches);
  // The edges of the decimal range, and a negative word.
  int flags = program.load32(item, 16);
  int low = program.constant(int64_t{0xffff});
  int high = program.constant(int64_t{0x10000});
  program.check_ne(program.bit_and(flags, low), high, 2);
  program.store(1, program.constant(int64_t{-1}));

  CHECK(to_text(program) == R"(glue check_f params 8 slots 2
helper tensor_matches 2
  %0 = param 1
  %1 = param 2
  %2 = const 0
  check_ult %2, %1 else 0
  %3 = load %0, 0
  check_nonzero %3 else 0
  store 0, %3
  %4 = load %3, 8
  %5 = const 0x7f3a10203040
  check_eq %4, %5 else 0
  %6 = call tensor_matches(%5, %3)
  check_nonzero %6 else 1
  %7 = load32 %3, 16
  %8 = const 65535
  %9 = const 0x10000
  %10 = and %7, %8
  check_ne %10, %9 else 2
  %11 = const 0xffffffffffffffff
  store 1, %11
end
)");
  CHECK(verify_glue_program(program).empty());
  // The text parses back to the same program, without the helper's address.
  CHECK(to_text(parse_ok(to_text(program))) == to_text(program));
}

TEST_CASE("glue IR: parse errors name line:column and what was expected", "[codegen][glue_ir]") {
  const std::string header = "glue f params 1 slots 1\n";
  // Use of an undefined value.
  CHECK(parse_error(header + "  %a = param 0\n  check_eq %a, %b else 0\nend\n") ==
        "3:16: use of undefined value %b, found '%b else 0'");
  // An instruction cannot use the value it defines.
  CHECK(parse_error(header + "  %a = and %a, %a\nend\n") ==
        "2:12: use of undefined value %a, found '%a, %a'");
  // A value defined twice.
  CHECK(parse_error(header + "  %a = param 0\n  %a = const 1\nend\n") ==
        "3:3: value %a defined twice, found '%a = const 1'");
  // A call of a helper that was not declared.
  CHECK(parse_error(header + "  %a = param 0\n  %r = call g(%a)\nend\n") ==
        "3:13: call of undeclared helper g, found 'g(%a)'");
  // A call with the wrong number of arguments.
  CHECK(parse_error(
            "glue f params 1 slots 1\nhelper g 2\n  %a = param 0\n  %r = call g(%a)\nend\n") ==
        "4:13: helper g takes 2 arguments, the call passes 1, found 'g(%a)'");
  // A helper declared twice, and one declared after the body began.
  CHECK(parse_error(header + "helper g 1\nhelper g 2\nend\n") ==
        "3:8: helper g declared twice, found 'g 2'");
  CHECK(parse_error(header + "  %a = param 0\nhelper g 1\nend\n") ==
        "3:1: helpers are declared before the first instruction, found 'helper g 1'");
  CHECK(parse_error(header + "helper g -1\nend\n") ==
        "2:10: expected a helper's arity (0 or more), found '-1'");
  // Malformed header and numbers.
  CHECK(parse_error("glue f params x slots 0\nend\n") ==
        "1:15: expected a parameter count, found 'x slots 0'");
  CHECK(parse_error("glue 1f params 0 slots 0\nend\n") ==
        "1:6: expected a program name, found '1f params 0 slot'");
  CHECK(parse_error("kernel f params 0 slots 0\nend\n") ==
        "1:1: expected 'glue', found 'kernel f params '");
  CHECK(parse_error(header + "  %c = const 0xzz\nend\n") ==
        "2:14: expected a word (decimal or 0x hex), found '0xzz'");
  CHECK(parse_error(header + "  %c = const 0x10000000000000000\nend\n") ==
        "2:14: expected a word (decimal or 0x hex), found '0x10000000000000'");
  CHECK(parse_error(header + "  %c = const 12ab\nend\n") ==
        "2:14: expected a word (decimal or 0x hex), found '12ab'");
  // One instruction per line.
  CHECK(parse_error(header + "  %a = param 0 %b = param 0\nend\n") ==
        "2:16: expected the end of the line, found '%b = param 0'");
  CHECK(parse_error(header + "  %a = param\n  store 0, %a\nend\n") ==
        "2:13: expected a parameter index, found end of line");
  // Ops in the wrong place, unknown ops, a missing `else`.
  CHECK(parse_error(header + "  %a = param 0\n  %s = store 0, %a\nend\n") ==
        "3:8: expected an operation that defines a value (param, const, load, load32, and, "
        "call, slot_addr), found 'store 0, %a'");
  CHECK(parse_error(header + "  param 0\nend\n") ==
        "2:3: expected an instruction (%name = ..., store, check_eq, check_ne, check_nonzero, "
        "check_ult) or 'end', found 'param 0'");
  CHECK(parse_error(header + "  %a = param 0\n  check_nonzero %a 3\nend\n") ==
        "3:20: expected 'else', found '3'");
  // The end: missing, or followed by more.
  CHECK(parse_error(header + "  %a = param 0\n") ==
        "3:1: expected an instruction (%name = ..., store, check_eq, check_ne, check_nonzero, "
        "check_ult) or 'end', found end of input");
  CHECK(parse_error(header + "end\nend\n") ==
        "3:1: expected end of input after 'end', found 'end'");
}

// A well-formed program to break, one field at a time.
GlueProgram small_program() {
  GlueProgram program;
  program.name = "small";
  program.param_count = 1;
  program.slot_count = 1;
  int helper = program.add_helper("h", 1, nullptr);
  int p = program.param(0);                // body[0]
  int word = program.load(p, 8);           // body[1]
  program.check_nonzero(word, 0);          // body[2]
  int result = program.call(helper, {p});  // body[3]
  program.check_eq(word, result, 1);       // body[4]
  program.store(0, result);                // body[5]
  return program;
}

TEST_CASE("glue IR verifier: one message per problem", "[codegen][glue_ir]") {
  CHECK(verify_glue_program(small_program()).empty());

  SECTION("names, counts and helpers") {
    GlueProgram program = small_program();
    program.name = "not an identifier";
    program.param_count = -1;
    program.slot_count = -2;
    program.helpers.push_back(GlueHelper{"h", 1, nullptr});
    program.helpers.push_back(GlueHelper{"9lives", -3, nullptr});
    CHECK(verify_glue_program(program) ==
          Messages{"the program's name 'not an identifier' is not an identifier",
                   "param_count -1 is negative", "slot_count -2 is negative",
                   "helper 1 'h': the name is used twice",
                   "helper 2 '9lives': the name is not an identifier",
                   "helper 2 '9lives': arity -3 is negative",
                   "instruction 0 (param): param index 0 is outside [0, -1)",
                   "instruction 5 (store): slot 0 is outside [0, -2)"});
  }
  SECTION("operands defined before use") {
    GlueProgram program = small_program();
    program.body[1].operands = {1};   // its own value
    program.body[4].operands[1] = 7;  // never defined
    program.body[5].operands = {-1};
    CHECK(verify_glue_program(program) ==
          Messages{"instruction 1 (load): operand %1 is not defined by an earlier instruction",
                   "instruction 4 (check_eq): operand %7 is not defined by an earlier instruction",
                   "instruction 5 (store): operand %-1 is not defined by an earlier instruction"});
  }
  SECTION("operand counts") {
    GlueProgram program = small_program();
    program.body[2].operands.push_back(0);  // check_nonzero with two
    program.body[3].operands.clear();       // a call of a helper of arity 1 with none
    program.body[4].operands.pop_back();    // check_eq with one
    program.body[0].operands = {0};         // param takes none (and %0 is not defined yet)
    CHECK(verify_glue_program(program) ==
          Messages{"instruction 0 (param): takes 0 operands, has 1",
                   "instruction 0 (param): operand %0 is not defined by an earlier instruction",
                   "instruction 2 (check_nonzero): takes 1 operand, has 2",
                   "instruction 3 (call): takes 1 operand, has 0",
                   "instruction 4 (check_eq): takes 2 operands, has 1"});
  }
  SECTION("ranges: params, slots, offsets, helpers, failure codes") {
    GlueProgram program = small_program();
    program.body[0].immediate = 1;   // param 1 of 1
    program.body[1].immediate = -8;  // load at a negative offset
    program.body[2].fail_code = -1;  // would read as kGluePassed
    program.body[3].helper = 1;      // no such helper
    program.body[5].immediate = 1;   // slot 1 of 1
    CHECK(verify_glue_program(program) ==
          Messages{"instruction 0 (param): param index 1 is outside [0, 1)",
                   "instruction 1 (load): offset -8 is negative",
                   "instruction 2 (check_nonzero): failure code -1 is negative",
                   "instruction 3 (call): helper 1 out of range (1 helpers)",
                   "instruction 5 (store): slot 1 is outside [0, 1)"});
  }
  SECTION("a body edited so that value_count() is stale") {
    GlueProgram program = small_program();
    GlueInstr extra;
    extra.op = GlueOp::Const;
    extra.immediate = 3;
    program.body.push_back(extra);
    CHECK(verify_glue_program(program) ==
          Messages{"the body defines 4 values but value_count() is 3"});
  }
  SECTION("a byte that is no op") {
    GlueProgram program = small_program();
    program.body[2].op = static_cast<GlueOp>(200);
    CHECK(verify_glue_program(program) == Messages{"instruction 2: unknown op 200"});
  }
}

}  // namespace
}  // namespace dynvm::codegen
