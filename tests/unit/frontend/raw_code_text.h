// Test helpers: RawCode as the text tests/data/marshal/generate.py writes from CPython's
// view of the same code objects, and file/fixture access.
#pragma once

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dynvm/frontend/raw_code.h"

namespace dynvm::frontend::testing {

inline std::string read_binary_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

inline std::string fixture_path(const std::string& relative) {
  return std::string(DYNVM_TEST_DATA_DIR) + "/" + relative;
}

inline ConstantPtr str_constant(const std::string& utf8) {
  auto constant = std::make_shared<Constant>();
  constant->kind = Constant::Kind::Str;
  constant->bytes = utf8;
  return constant;
}

// repr() of a tuple of strings, as Python prints co_names.
inline std::string names_repr(const std::vector<std::string>& names) {
  Constant tuple;
  tuple.kind = Constant::Kind::Tuple;
  for (const std::string& name : names) tuple.items.push_back(str_constant(name));
  return tuple.repr();
}

// co_varnames, co_cellvars or co_freevars: the localsplus names whose kind has `bit`.
inline std::string localsplus_repr(const RawCode& code, uint8_t bit) {
  std::vector<std::string> selected;
  for (size_t i = 0; i < code.localsplusnames.size(); ++i) {
    if (code.localspluskinds[i] & bit) selected.push_back(code.localsplusnames[i]);
  }
  return names_repr(selected);
}

inline std::string hex_or_dash(const std::string& bytes) {
  if (bytes.empty()) return "-";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out += kHex[static_cast<unsigned char>(c) >> 4];
    out += kHex[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

// repr(), but with frozenset elements sorted by their repr, as generate.py prints them:
// the order in marshal data depends on reference counts when it was written.
inline std::string canonical_repr(const Constant& constant) {
  if (constant.kind != Constant::Kind::Tuple && constant.kind != Constant::Kind::FrozenSet) {
    return constant.repr();
  }
  std::vector<std::string> items;
  for (const ConstantPtr& item : constant.items) items.push_back(canonical_repr(*item));
  if (constant.kind == Constant::Kind::FrozenSet) std::sort(items.begin(), items.end());
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i) joined += (i > 0 ? ", " : "") + items[i];
  if (constant.kind == Constant::Kind::Tuple) {
    return "(" + joined + (items.size() == 1 ? ",)" : ")");
  }
  return items.empty() ? "frozenset()" : "frozenset({" + joined + "})";
}

// Every code object depth-first in co_consts order, one block each, like generate.py.
inline void describe_code(const RawCode& code, std::vector<std::string>& lines) {
  lines.push_back("code " + code.qualname);
  lines.push_back("name " + code.name);
  lines.push_back("filename " + code.filename);
  lines.push_back("firstlineno " + std::to_string(code.firstlineno));
  lines.push_back("argcount " + std::to_string(code.argcount));
  lines.push_back("posonlyargcount " + std::to_string(code.posonlyargcount));
  lines.push_back("kwonlyargcount " + std::to_string(code.kwonlyargcount));
  lines.push_back("stacksize " + std::to_string(code.stacksize));
  lines.push_back("flags " + std::to_string(code.flags));
  lines.push_back("varnames " + localsplus_repr(code, kLocalKindLocal));
  lines.push_back("cellvars " + localsplus_repr(code, kLocalKindCell));
  lines.push_back("freevars " + localsplus_repr(code, kLocalKindFree));
  lines.push_back("names " + names_repr(code.names));
  lines.push_back("co_code " + hex_or_dash(code.code));
  lines.push_back("linetable " + hex_or_dash(code.linetable));
  lines.push_back("exceptiontable " + hex_or_dash(code.exceptiontable));
  for (const ConstantPtr& constant : code.consts)
    lines.push_back("const " + canonical_repr(*constant));
  lines.push_back("end");
  for (const ConstantPtr& constant : code.consts) {
    if (constant->kind == Constant::Kind::Code) describe_code(*constant->code, lines);
  }
}

inline std::vector<std::string> describe_code(const RawCode& code) {
  std::vector<std::string> lines;
  describe_code(code, lines);
  return lines;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

}  // namespace dynvm::frontend::testing
