// stack_effect() agrees with dis.stack_effect for every opcode, argument 0..300 and jump
// variant that the dumps of CPython 3.11, 3.12 and 3.13 record.
#include <string>

#include "catch.h"
#include "dynvm/frontend/stack_effect.h"
#include "test_support.h"

using namespace dynvm::frontend;
using dynvm::frontend::testing::data_path;
using dynvm::frontend::testing::Json;
using dynvm::frontend::testing::read_json;

namespace {

void check_against_dump(PythonVersion version, const std::string& dump_path) {
  const Json dump = read_json(data_path(dump_path));
  const std::optional<bool> jumps[] = {std::nullopt, true, false};
  size_t compared = 0;
  size_t mismatches = 0;
  for (const auto& [name, rows] : dump["stack_effect"].members) {
    const int opcode = dump["opmap"][name].as_int();
    for (size_t arg = 0; arg < rows.size(); ++arg) {
      for (size_t j = 0; j < 3; ++j) {
        const Json& expected = rows[arg][j];
        auto ours = stack_effect(version, opcode, static_cast<int>(arg), jumps[j]);
        bool same =
            expected.is_null() ? !ours.has_value() : ours.has_value() && *ours == expected.as_int();
        ++compared;
        if (!same && ++mismatches <= 20) {
          FAIL_CHECK(name << " arg " << arg << " jump " << j << ": dis says " << expected.dump()
                          << ", dynvm " << (ours ? std::to_string(*ours) : std::string("none")));
        }
      }
    }
  }
  CHECK(mismatches == 0);
  CHECK(compared > 60000);
}

}  // namespace

TEST_CASE("stack effects match dis.stack_effect of CPython 3.11") {
  check_against_dump({3, 11}, "py311/opcode_dump.json");
}

TEST_CASE("stack effects match dis.stack_effect of CPython 3.12") {
  check_against_dump({3, 12}, "py312/opcode_dump.json");
}

TEST_CASE("stack effects match dis.stack_effect of CPython 3.13") {
  check_against_dump({3, 13}, "py313/opcode_dump.json");
}

TEST_CASE("3.13's changed and new stack effects") {
  const PythonVersion v{3, 13};
  CHECK(stack_effect(v, Opcode::END_FOR, 0) == -1);  // 3.12: -2
  CHECK(stack_effect({3, 12}, Opcode::END_FOR, 0) == -2);
  CHECK(stack_effect(v, Opcode::MAKE_FUNCTION, 0) == 0);  // attributes come separately
  CHECK(stack_effect(v, Opcode::SET_FUNCTION_ATTRIBUTE, 8) == -1);
  CHECK(stack_effect(v, Opcode::CALL_KW, 2) == -4);  // callable, self|NULL, names
  CHECK(stack_effect(v, Opcode::LOAD_FAST_LOAD_FAST, 0x12) == 2);
  CHECK(stack_effect(v, Opcode::STORE_FAST_STORE_FAST, 0x12) == -2);
  CHECK(stack_effect(v, Opcode::TO_BOOL, 0) == 0);
  CHECK_FALSE(stack_effect(v, Opcode::FORMAT_VALUE, 0));  // gone in 3.13
  CHECK_FALSE(stack_effect(v, Opcode::KW_NAMES, 0));
  // Pseudo opcodes: 3.13 gives the block set-ups effects, 3.12 none.
  CHECK(stack_effect(v, 264, 0, true) == 2);   // SETUP_CLEANUP
  CHECK(stack_effect(v, 264, 0, false) == 0);  // SETUP_CLEANUP
  CHECK(stack_effect(v, 258, 0) == 1);         // LOAD_CLOSURE
  CHECK_FALSE(stack_effect({3, 12}, 257, 0));  // 3.12's SETUP_CLEANUP
  CHECK_FALSE(stack_effect(v, 300, 0));
  // Specialised forms have none; instrumented ones their own.
  CHECK_FALSE(stack_effect(v, dynvm::frontend::testing::opcode_byte(v, "TO_BOOL_INT"), 0));
  CHECK(stack_effect(v, dynvm::frontend::testing::opcode_byte(v, "INSTRUMENTED_CALL"), 2) == 0);
}

TEST_CASE("stack effects of base opcodes, specialised bytes and unknown numbers") {
  CHECK(stack_effect({3, 11}, Opcode::CALL, 3) == -1);  // PRECALL took the arguments
  CHECK(stack_effect({3, 12}, Opcode::CALL, 3) == -4);  // callable, self|NULL, 3 arguments
  CHECK(stack_effect({3, 11}, Opcode::FOR_ITER, 0, true) == -1);
  CHECK(stack_effect({3, 11}, Opcode::FOR_ITER, 0, false) == 1);
  CHECK(stack_effect({3, 11}, Opcode::FOR_ITER, 0) == 1);
  CHECK_FALSE(stack_effect({3, 11}, Opcode::RETURN_CONST, 0));  // not a 3.11 opcode
  CHECK_FALSE(stack_effect({3, 14}, Opcode::NOP, 0));
  // A specialised byte has no effect of its own, as in dis.
  int specialised = dynvm::frontend::testing::opcode_byte({3, 11}, "LOAD_ATTR_SLOT");
  REQUIRE(specialised > 0);
  CHECK_FALSE(stack_effect({3, 11}, specialised, 0));
  CHECK_FALSE(stack_effect({3, 11}, 300, 0));
  CHECK_FALSE(stack_effect({3, 11}, -1, 0));
}
