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
  // 3.12+ list the opcodes that take an argument; 3.13 renumbered them, so that
  // HAVE_ARGUMENT no longer divides them (WITH_EXCEPT_START, at it, takes none).
  const bool has_hasarg = dump.has("hasarg");
  const auto hasarg = has_hasarg ? int_set(dump["hasarg"]) : std::set<int>{};
  // A list by opcode number (3.11, 3.12) or a mapping from name (3.13), 0 where absent.
  auto caches_of = [&dump](const std::string& name, int number) {
    const Json& caches = dump["_inline_cache_entries"];
    if (caches.kind == Json::Kind::kObject) return caches.has(name) ? caches[name].as_int() : 0;
    return caches[static_cast<size_t>(number)].as_int();
  };

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
    CHECK(info.cache_entries == caches_of(name, number));
    CHECK(info.has_arg() == (has_hasarg ? hasarg.count(number) > 0 : number >= have_argument));
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
    if (haslocal.count(number)) {
      CHECK((info.arg == ArgKind::kLocal || info.arg == ArgKind::kLocalPair));
      const bool pair = name == "LOAD_FAST_LOAD_FAST" || name == "STORE_FAST_LOAD_FAST" ||
                        name == "STORE_FAST_STORE_FAST";
      CHECK((info.arg == ArgKind::kLocalPair) == pair);
    }
    if (hasfree.count(number)) CHECK(info.arg == ArgKind::kCell);
    ++checked;
  }
  CHECK(checked > 100);

  // Specialised instructions map to their family. 3.13 numbers them in
  // _specialized_opmap; before, they take the unused numbers in order.
  std::map<std::string, std::string> base_of;
  for (const auto& [base, family] : dump["_specializations"].members) {
    for (const auto& member : family.items) base_of[member.string] = base;
  }
  auto check_specialised = [&](const std::string& name, int number) {
    INFO(name);
    const OpcodeInfo& info = table[static_cast<uint8_t>(number)];
    CHECK(info.name == name);
    CHECK(opcode_name(info.base) == base_of[name]);
    CHECK(info.cache_entries == table[*table.byte_of(info.base)].cache_entries);
    CHECK(info.arg == table[*table.byte_of(info.base)].arg);
  };
  size_t specialised = 0;
  if (dump.has("_specialized_opmap")) {
    for (const auto& [name, number] : dump["_specialized_opmap"].members) {
      check_specialised(name, number.as_int());
      ++specialised;
    }
  } else {
    std::set<int> used;
    for (const auto& [name, number] : dump["opmap"].members) used.insert(number.as_int());
    int slot = 0;
    for (const auto& name : dump["_specialized_instructions"].items) {
      while (used.count(slot)) ++slot;
      check_specialised(name.string, slot++);
      ++specialised;
    }
  }
  CHECK(specialised == base_of.size());
}

}  // namespace

TEST_CASE("the 3.11 table matches CPython 3.11's opcode module") {
  check_against_dump({3, 11}, "py311/opcode_dump.json");
}

TEST_CASE("the 3.12 table matches CPython 3.12's opcode module") {
  check_against_dump({3, 12}, "py312/opcode_dump.json");
}

TEST_CASE("the 3.13 table matches CPython 3.13's opcode module") {
  check_against_dump({3, 13}, "py313/opcode_dump.json");
}

TEST_CASE("operator tables match the opcode modules") {
  // Each version lists a prefix of the enum's operators; the newest lists them all.
  const char* paths[] = {"py311/opcode_dump.json", "py312/opcode_dump.json",
                         "py313/opcode_dump.json"};
  for (const char* path : paths) {
    const Json dump = read_json(data_path(path));
    const bool newest = std::string(path) == paths[2];
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
      const Json& ones = dump["_intrinsic_1_descs"];
      const Json& twos = dump["_intrinsic_2_descs"];
      REQUIRE(ones.size() <= kIntrinsic1Count);
      REQUIRE(twos.size() <= kIntrinsic2Count);
      if (newest) CHECK(ones.size() == kIntrinsic1Count);
      if (newest) CHECK(twos.size() == kIntrinsic2Count);
      for (size_t i = 0; i < ones.size(); ++i) {
        CHECK(intrinsic1_name(static_cast<Intrinsic1>(i)) == ones[i].string);
      }
      for (size_t i = 0; i < twos.size(); ++i) {
        CHECK(intrinsic2_name(static_cast<Intrinsic2>(i)) == twos[i].string);
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

  // 3.13 renumbered everything and changed arguments and caches.
  const OpcodeTable& t313 = opcode_table({3, 13});
  CHECK(t313.byte_of(Opcode::LOAD_ATTR) == 82);
  CHECK(t313.byte_of(Opcode::RESUME) == 149);
  CHECK(t313[82].cache_entries == 9);
  CHECK(t313[82].arg == ArgKind::kAttrName);
  CHECK(t313[91].arg == ArgKind::kGlobalName);  // LOAD_GLOBAL
  CHECK(t313[91].cache_entries == 4);
  CHECK(t313[44].name == "WITH_EXCEPT_START");  // at HAVE_ARGUMENT, without one
  CHECK_FALSE(t313[44].has_arg());
  CHECK(t313[97].name == "POP_JUMP_IF_FALSE");
  CHECK(t313[97].cache_entries == 1);  // 3.12: none
  CHECK(t312[*t312.byte_of(Opcode::POP_JUMP_IF_FALSE)].cache_entries == 0);
  CHECK(t313[77].jump == JumpKind::kBackward);  // JUMP_BACKWARD
  CHECK(t313[88].arg == ArgKind::kLocalPair);   // LOAD_FAST_LOAD_FAST
  CHECK(t313[60].arg == ArgKind::kConvertValue);
  CHECK(t313[106].arg == ArgKind::kMakeFunctionFlags);  // SET_FUNCTION_ATTRIBUTE
  CHECK_FALSE(t313[*t313.byte_of(Opcode::MAKE_FUNCTION)].has_arg());
  CHECK_FALSE(t313.byte_of(Opcode::FORMAT_VALUE).has_value());
  CHECK_FALSE(t313.byte_of(Opcode::KW_NAMES).has_value());
  CHECK_FALSE(t312.byte_of(Opcode::CALL_KW).has_value());
  // A specialised instruction below HAVE_ARGUMENT still takes its base's argument.
  CHECK(t313[3].name == "BINARY_OP_INPLACE_ADD_UNICODE");
  CHECK(t313[3].base == Opcode::BINARY_OP);
  CHECK(t313[3].arg == ArgKind::kBinaryOp);
  CHECK(t313[245].name == "INSTRUMENTED_CALL_KW");
  CHECK(t313[245].base == Opcode::CALL_KW);
}

TEST_CASE("unsupported versions have no valid opcodes") {
  CHECK_FALSE(is_supported_version({3, 10}));
  CHECK_FALSE(is_supported_version({3, 14}));
  CHECK(is_supported_version({3, 11}));
  CHECK(is_supported_version({3, 13}));
  const OpcodeTable& none = opcode_table({3, 14});
  for (int b = 0; b < 256; ++b) CHECK_FALSE(none[static_cast<uint8_t>(b)].valid);
}
