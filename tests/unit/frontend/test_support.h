// Helpers for the frontend tests: a small JSON reader for the fixtures, file reading, and
// a builder of hand-written RawCode.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/frontend/opcode.h"
#include "dynvm/frontend/raw_code.h"

namespace dynvm::frontend::testing {

inline std::string data_path(const std::string& relative) {
  return std::string(DYNVM_TEST_DATA_DIR) + "/" + relative;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A JSON value; numbers are kept as doubles (the fixtures hold small integers).
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;
  std::map<std::string, Json> members;

  bool is_null() const { return kind == Kind::kNull; }
  int as_int() const { return static_cast<int>(number); }
  const Json& operator[](size_t i) const { return items.at(i); }
  const Json& operator[](const std::string& key) const {
    auto it = members.find(key);
    if (it == members.end()) throw std::runtime_error("no key " + key);
    return it->second;
  }
  bool has(const std::string& key) const { return members.count(key) != 0; }
  size_t size() const { return kind == Kind::kObject ? members.size() : items.size(); }

  friend bool operator==(const Json& a, const Json& b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case Kind::kNull:
        return true;
      case Kind::kBool:
        return a.boolean == b.boolean;
      case Kind::kNumber:
        return a.number == b.number;
      case Kind::kString:
        return a.string == b.string;
      case Kind::kArray:
        return a.items == b.items;
      case Kind::kObject:
        return a.members == b.members;
    }
    return false;
  }
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

  // Compact text, for failure messages.
  std::string dump() const {
    switch (kind) {
      case Kind::kNull:
        return "null";
      case Kind::kBool:
        return boolean ? "true" : "false";
      case Kind::kNumber: {
        std::ostringstream s;
        s << number;
        return s.str();
      }
      case Kind::kString:
        return "\"" + string + "\"";
      case Kind::kArray: {
        std::string s = "[";
        for (size_t i = 0; i < items.size(); ++i) s += (i ? "," : "") + items[i].dump();
        return s + "]";
      }
      case Kind::kObject: {
        std::string s = "{";
        bool first = true;
        for (const auto& [k, v] : members) {
          s += (first ? "\"" : ",\"") + k + "\":" + v.dump();
          first = false;
        }
        return s + "}";
      }
    }
    return {};
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Json parse() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("trailing text");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  uint32_t hex4() {
    if (pos_ + 4 > text_.size()) fail("short \\u escape");
    uint32_t v = static_cast<uint32_t>(std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16));
    pos_ += 4;
    return v;
  }
  std::string parse_string() {
    std::string out;
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("bad escape");
      char e = text_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            uint32_t low = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          out += e;
          break;
      }
    }
  }
  Json parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    Json v;
    char c = text_[pos_];
    if (c == '{') {
      v.kind = Json::Kind::kObject;
      ++pos_;
      skip_space();
      if (consume("}")) return v;
      while (true) {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected key");
        std::string key = parse_string();
        skip_space();
        if (!consume(":")) fail("expected ':'");
        v.members[key] = parse_value();
        skip_space();
        if (consume("}")) return v;
        if (!consume(",")) fail("expected ','");
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::kArray;
      ++pos_;
      skip_space();
      if (consume("]")) return v;
      while (true) {
        v.items.push_back(parse_value());
        skip_space();
        if (consume("]")) return v;
        if (!consume(",")) fail("expected ','");
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::kString;
      v.string = parse_string();
      return v;
    }
    if (consume("null")) return v;
    if (consume("true")) {
      v.kind = Json::Kind::kBool;
      v.boolean = true;
      return v;
    }
    if (consume("false")) {
      v.kind = Json::Kind::kBool;
      return v;
    }
    size_t end = pos_;
    while (end < text_.size() &&
           std::string_view("+-0123456789.eE").find(text_[end]) != std::string_view::npos) {
      ++end;
    }
    if (end == pos_) fail("unexpected character");
    v.kind = Json::Kind::kNumber;
    v.number = std::strtod(std::string(text_.substr(pos_, end - pos_)).c_str(), nullptr);
    pos_ = end;
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

inline Json parse_json(std::string_view text) { return JsonParser(text).parse(); }
inline Json read_json(const std::string& path) { return parse_json(read_file(path)); }

// The byte a version uses for an opcode name (specialised names included); -1 if none.
inline int opcode_byte(PythonVersion version, std::string_view name) {
  const OpcodeTable& table = opcode_table(version);
  for (int b = 0; b < 256; ++b) {
    if (table[static_cast<uint8_t>(b)].valid && table[static_cast<uint8_t>(b)].name == name) {
      return b;
    }
  }
  return -1;
}

// Builds a RawCode instruction by instruction: EXTENDED_ARG prefixes for wide arguments
// and zeroed inline caches are added as CPython's assembler adds them.
class CodeBuilder {
 public:
  explicit CodeBuilder(PythonVersion version) {
    raw_.version = version;
    raw_.name = raw_.qualname = "f";
    raw_.filename = "test.py";
    raw_.firstlineno = 1;
    raw_.stacksize = 10;
  }

  // Appends `name` with `arg`; returns the instruction's byte offset (of its prefix).
  uint32_t op(std::string_view name, uint32_t arg = 0) {
    auto offset = static_cast<uint32_t>(raw_.code.size());
    int byte = opcode_byte(raw_.version, name);
    if (byte < 0) throw std::runtime_error("no opcode " + std::string(name));
    const OpcodeInfo& info = opcode_table(raw_.version)[static_cast<uint8_t>(byte)];
    if (info.has_arg()) {
      for (int shift = 24; shift > 0; shift -= 8) {
        if (arg >> shift) unit(opcode_byte(raw_.version, "EXTENDED_ARG"), (arg >> shift) & 0xFF);
      }
    }
    unit(byte, arg & 0xFF);
    for (int i = 0; i < info.cache_entries; ++i) unit(0, 0);
    return offset;
  }
  // Appends one raw code unit.
  void unit(int opcode, uint32_t arg) {
    raw_.code += static_cast<char>(opcode);
    raw_.code += static_cast<char>(arg);
  }
  CodeBuilder& constant(ConstantPtr c) {
    raw_.consts.push_back(std::move(c));
    return *this;
  }
  CodeBuilder& none_constant() { return constant(std::make_shared<Constant>()); }
  CodeBuilder& int_constant(int64_t value) {
    auto c = std::make_shared<Constant>();
    c->kind = Constant::Kind::Int;
    c->int_value = BigInt::from_int64(value);
    return constant(c);
  }
  CodeBuilder& str_constant(const std::string& value) {
    auto c = std::make_shared<Constant>();
    c->kind = Constant::Kind::Str;
    c->bytes = value;
    return constant(c);
  }
  CodeBuilder& name(const std::string& n) {
    raw_.names.push_back(n);
    return *this;
  }
  CodeBuilder& local(const std::string& n, uint8_t kind = kLocalKindLocal) {
    raw_.localsplusnames.push_back(n);
    raw_.localspluskinds.push_back(kind);
    return *this;
  }
  RawCode& raw() { return raw_; }
  RawCode build() const { return raw_; }

 private:
  RawCode raw_;
};

}  // namespace dynvm::frontend::testing
