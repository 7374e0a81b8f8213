// The generated opcode tables agree with each Python's own opcode module (its JSON dump).
#include <set>
#include <string>

#include "catch.h"
#include "dynvm/frontend/opcode.h"
#include "test_support.h"

using namespace dynvm::frontend;
using dynvm::frontend::testing::data_path;
using dynvm::frontend::testing::Json;
using dynvm::frontend::testing::read_json;

namespace {

std::set<int> int_set(const Json& list) {
  std::set<int> out;
  for (const auto& item : list.items) out.insert(item.as_int());
  return out;
}

void check_against_dump(PythonVersion version, const std::string& dump_path) {
  const Json dump = read_json(data_path(dump_path));
  const OpcodeTable& table = opcode_table(version);
  REQUIRE(table.version() == version);
  const auto hasjrel = int_set(dump["hasjrel"]);
  const auto hasjabs = int_set(dump["hasjabs"]);
  const auto hasconst = int_set(dump["hasconst"]);
  const auto hasname = int_set(dump["hasname"]);
  const auto haslocal = int_set(dump["haslocal"]);
  const auto hasfree = int_set(dump["hasfree"]);
  const int have_argument = dump["HAVE_ARGUMENT"].as_int();

  // Every real opcode of the module, under its own number, as its own base.
  int checked = 0;
  for (const auto& [name, number_json] : dump["opmap"].members) {
    const int number = number_json.as_int();
    if (number >= 256) continue;  // pseudo opcodes are not bytecode
    INFO(name);
    const OpcodeInfo& info = table[static_cast<uint8_t>(number)];
    REQUIRE(info.valid);
    CHECK(info.name == name);
    const bool instrumented =
        name.rfind("INSTRUMENTED_", 0) == 0 && dump["opmap"].has(name.substr(13));
    if (instrumented) {
      CHECK(opcode_name(info.base) == name.substr(13));
      continue;
    }
    CHECK(opcode_name(info.base) == name);
    CHECK(table.byte_of(info.base) == number);
    CHECK(info.cache_entries ==
          dump["_inline_cache_entries"][static_cast<size_t>(number)].as_int());
    CHECK(info.has_arg() == (number >= have_argument));
    if (hasjrel.count(number)) {
      CHECK(info.arg == ArgKind::kJump);
      CHECK(info.jump == (name.find("JUMP_BACKWARD") != std::string::npos ? JumpKind::kBackward
                                                                          : JumpKind::kForward));
    } else if (hasjabs.count(number)) {
      CHECK(info.jump == JumpKind::kAbsolute);
    } else {
      CHECK(info.jump == JumpKind::kNone);
    }
    if (hasconst.count(number)) CHECK(info.arg == ArgKind::kConst);
    if (hasname.count(number)) {
      CHECK((info.arg == ArgKind::kName || info.arg == ArgKind::kGlobalName ||
             info.arg == ArgKind::kAttrName || info.arg == ArgKind::kSuperAttrName));
    }
    if (haslocal.count(number)) CHECK(info.arg == ArgKind::kLocal);
    if (hasfree.count(number)) CHECK(info.arg == ArgKind::kCell);
    ++checked;
  }
  CHECK(checked > 100);

  // Specialised instructions take the unused numbers in order and map to their family.
  std::map<std::string, std::string> base_of;
  for (const auto& [base, family] : dump["_specializations"].members) {
    for (const auto& member : family.items) base_of[member.string] = base;
  }
  std::set<int> used;
  for (const auto& [name, number] : dump["opmap"].members) used.insert(number.as_int());
  int slot = 0;
  for (const auto& specialised : dump["_specialized_instructions"].items) {
    while (used.count(slot)) ++slot;
    INFO(specialised.string);
    const OpcodeInfo& info = table[static_cast<uint8_t>(slot)];
    CHECK(info.name == specialised.string);
    CHECK(opcode_name(info.base) == base_of[specialised.string]);
    ++slot;
  }
}

}  // namespace

TEST_CASE("the 3.11 table matches CPython 3.11's opcode module") {
  check_against_dump({3, 11}, "py311/opcode_dump.json");
}

TEST_CASE("the 3.12 table matches CPython 3.12's opcode module") {
  check_against_dump({3, 12}, "py312/opcode_dump.json");
}

TEST_CASE("operator tables match the opcode modules") {
  for (const char* path : {"py311/opcode_dump.json", "py312/opcode_dump.json"}) {
    const Json dump = read_json(data_path(path));
    INFO(path);
    REQUIRE(dump["_nb_ops"].size() == kBinaryOpCount);
    for (size_t i = 0; i < kBinaryOpCount; ++i) {
      CHECK(binary_op_symbol(static_cast<BinaryOp>(i)) == dump["_nb_ops"][i][1].string);
    }
    REQUIRE(dump["cmp_op"].size() == kCompareOpCount);
    for (size_t i = 0; i < kCompareOpCount; ++i) {
      CHECK(compare_op_symbol(static_cast<CompareOp>(i)) == dump["cmp_op"][i].string);
    }
    if (dump.has("_intrinsic_1_descs")) {
      REQUIRE(dump["_intrinsic_1_descs"].size() == kIntrinsic1Count);
      for (size_t i = 0; i < kIntrinsic1Count; ++i) {
        CHECK(intrinsic1_name(static_cast<Intrinsic1>(i)) == dump["_intrinsic_1_descs"][i].string);
      }
      REQUIRE(dump["_intrinsic_2_descs"].size() == kIntrinsic2Count);
      for (size_t i = 0; i < kIntrinsic2Count; ++i) {
        CHECK(intrinsic2_name(static_cast<Intrinsic2>(i)) == dump["_intrinsic_2_descs"][i].string);
      }
    }
  }
}

TEST_CASE("versions differ where CPython changed the bytecode") {
  const OpcodeTable& t311 = opcode_table({3, 11});
  const OpcodeTable& t312 = opcode_table({3, 12});
  CHECK(t311.byte_of(Opcode::PRECALL).has_value());
  CHECK_FALSE(t312.byte_of(Opcode::PRECALL).has_value());
  CHECK_FALSE(t311.byte_of(Opcode::RETURN_CONST).has_value());
  CHECK(t312.byte_of(Opcode::RETURN_CONST) == 121);
  CHECK(t312.byte_of(Opcode::END_FOR) == 4);
  CHECK(t311[106].arg == ArgKind::kName);      // LOAD_ATTR: plain name index
  CHECK(t312[106].arg == ArgKind::kAttrName);  // LOAD_ATTR: name << 1 | method
  CHECK(t312[141].arg == ArgKind::kSuperAttrName);
  CHECK(t311[116].arg == ArgKind::kGlobalName);
  CHECK(t312[116].cache_entries == 4);
  CHECK(t311[116].cache_entries == 5);
  // Instrumented opcodes run their base instruction.
  CHECK(t312[241].name == "INSTRUMENTED_CALL");
  CHECK(t312[241].base == Opcode::CALL);
  CHECK(t312[241].cache_entries == t312[*t312.byte_of(Opcode::CALL)].cache_entries);
}

TEST_CASE("unsupported versions have no valid opcodes") {
  CHECK_FALSE(is_supported_version({3, 10}));
  CHECK_FALSE(is_supported_version({3, 13}));
  CHECK(is_supported_version({3, 11}));
  const OpcodeTable& none = opcode_table({3, 13});
  for (int b = 0; b < 256; ++b) CHECK_FALSE(none[static_cast<uint8_t>(b)].valid);
}
