// The glue IR's text parser: line by line, building through GlueProgram's builder, errors with
// line:column.
#include "dynvm/codegen/glue_ir_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "glue/glue_op_table.h"

namespace dynvm::codegen {

namespace {

// Thrown inside the parser only; parse_glue_program turns it into an Error.
struct ParseFailure {
  std::string message;
};

// The format is line-oriented: the header, each helper and each instruction take one line.
// Blank lines and `#` comments are allowed anywhere; spaces and tabs separate tokens.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  GlueProgram parse() {
    skip_blank_lines();
    expect_word("glue");
    program_.name = identifier("a program name");
    expect_word("params");
    program_.param_count = count("a parameter count");
    expect_word("slots");
    program_.slot_count = count("a slot count");
    end_of_line();
    while (accept_word("helper")) {
      helper_declaration();
      end_of_line();
    }
    while (!accept_word("end")) {
      instruction();
      end_of_line();
    }
    end_of_line();
    if (pos_ != text_.size()) fail("expected end of input after 'end'");
    return std::move(program_);
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& what) {
    pos_ = at;
    fail(what);
  }

  [[noreturn]] void fail(const std::string& what) const {
    int line = 1;
    int column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    // What stands there, up to the end of its line.
    std::string_view rest = text_.substr(std::min(pos_, text_.size()));
    rest = rest.substr(0, std::min(rest.find_first_of("\r\n"), size_t{16}));
    std::string found = pos_ >= text_.size() ? "end of input"
                        : rest.empty()       ? "end of line"
                                             : "'" + std::string(rest) + "'";
    throw ParseFailure{std::to_string(line) + ":" + std::to_string(column) + ": " + what +
                       ", found " + found};
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Spaces, tabs and a comment up to (not including) the end of the line.
  void skip_space() {
    while (!at_end()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  void skip_blank_lines() {
    for (skip_space(); peek() == '\n'; skip_space()) ++pos_;
  }

  // The end of a line (or of the input); the blank lines after it go too.
  void end_of_line() {
    skip_space();
    if (at_end()) return;
    if (peek() != '\n') fail("expected the end of the line");
    skip_blank_lines();
  }

  bool accept(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }

  static bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }

  std::string_view word() {
    skip_space();
    size_t start = pos_;
    while (!at_end() && is_word_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  bool accept_word(std::string_view w) {
    skip_space();
    size_t start = pos_;
    if (word() == w) return true;
    pos_ = start;
    return false;
  }

  void expect_word(std::string_view w) {
    if (!accept_word(w)) fail("expected '" + std::string(w) + "'");
  }

  std::string identifier(const char* what) {
    skip_space();
    size_t start = pos_;
    std::string_view name = word();
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) {
      fail_at(start, std::string("expected ") + what);
    }
    return std::string(name);
  }

  // A word: decimal, optionally negative, or 0x hex of up to 64 bits (read as the word's bit
  // pattern, so 0xffffffffffffffff is -1).
  int64_t number(const char* what) {
    skip_space();
    size_t start = pos_;
    const char* first = text_.data() + pos_;
    const char* last = text_.data() + text_.size();
    int64_t value = 0;
    std::from_chars_result result{first, std::errc::invalid_argument};
    if (text_.substr(pos_, 2) == "0x" || text_.substr(pos_, 2) == "0X") {
      uint64_t bits = 0;
      result = std::from_chars(first + 2, last, bits, 16);
      value = static_cast<int64_t>(bits);
    } else {
      result = std::from_chars(first, last, value);
    }
    // A number ends where the word ends: "12abc" and "0x" are not numbers.
    if (result.ec != std::errc() || (result.ptr != last && is_word_char(*result.ptr))) {
      fail_at(start, std::string("expected ") + what);
    }
    pos_ += static_cast<size_t>(result.ptr - first);
    return value;
  }

  int count(const char* what) {
    skip_space();
    size_t start = pos_;
    int64_t n = number(what);
    if (n < INT_MIN || n > INT_MAX) fail_at(start, std::string("expected ") + what);
    return static_cast<int>(n);
  }

  void helper_declaration() {
    skip_space();
    size_t name_at = pos_;
    std::string name = identifier("a helper name");
    for (const GlueHelper& helper : program_.helpers) {
      if (helper.name == name) fail_at(name_at, "helper " + name + " declared twice");
    }
    skip_space();
    size_t arity_at = pos_;
    int arity = count("a helper's arity");
    if (arity < 0) fail_at(arity_at, "expected a helper's arity (0 or more)");
    program_.add_helper(name, arity, nullptr);
  }

  std::string value_name() {
    expect('%');
    size_t start = pos_;
    while (!at_end() && is_word_char(text_[pos_])) ++pos_;
    if (start == pos_) fail("expected a value name after '%'");
    return std::string(text_.substr(start, pos_ - start));
  }

  int use() {
    skip_space();
    size_t start = pos_;
    std::string name = value_name();
    auto it = values_.find(name);
    if (it == values_.end()) fail_at(start, "use of undefined value %" + name);
    return it->second;
  }

  // The operation word of an instruction, with where it starts.
  std::optional<GlueOp> op_word(size_t& at) {
    skip_space();
    at = pos_;
    return parse_glue_op(word());
  }

  void instruction() {
    skip_space();
    size_t start = pos_;
    size_t op_at = 0;
    if (peek() == '%') {
      std::string name = value_name();
      if (values_.count(name)) fail_at(start, "value %" + name + " defined twice");
      expect('=');
      std::optional<GlueOp> op = op_word(op_at);
      if (!op || !glue_op_defines_value(*op)) {
        fail_at(op_at,
                "expected an operation that defines a value (param, const, load, load32, "
                "and, call, slot_addr)");
      }
      // Registered after the operands, so an instruction cannot use its own value.
      values_[name] = definition(*op);
      return;
    }
    std::optional<GlueOp> op = op_word(op_at);
    if (!op || glue_op_defines_value(*op)) {
      pos_ = op_at;
      if (accept_word("helper")) {
        fail_at(op_at, "helpers are declared before the first instruction");
      }
      fail_at(op_at,
              "expected an instruction (%name = ..., store, check_eq, check_ne, "
              "check_nonzero, check_ult) or 'end'");
    }
    statement(*op);
  }

  // The right-hand side of `%r = op ...`; returns the value it defines.
  int definition(GlueOp op) {
    switch (op) {
      case GlueOp::Param:
        return program_.param(number("a parameter index"));
      case GlueOp::Const:
        return program_.constant(number("a word (decimal or 0x hex)"));
      case GlueOp::Load:
      case GlueOp::Load32: {
        int address = use();
        expect(',');
        int64_t offset = number("a byte offset");
        return op == GlueOp::Load ? program_.load(address, offset)
                                  : program_.load32(address, offset);
      }
      case GlueOp::And: {
        int a = use();
        expect(',');
        return program_.bit_and(a, use());
      }
      case GlueOp::Call:
        return call();
      case GlueOp::SlotAddr:
        return program_.slot_address(number("a slot index"));
      default:
        fail("internal: not a defining operation");
    }
  }

  int call() {
    skip_space();
    size_t name_at = pos_;
    std::string name = identifier("a helper name");
    int helper = -1;
    for (size_t i = 0; i < program_.helpers.size(); ++i) {
      if (program_.helpers[i].name == name) helper = static_cast<int>(i);
    }
    if (helper < 0) fail_at(name_at, "call of undeclared helper " + name);
    expect('(');
    std::vector<int> arguments;
    if (!accept(')')) {
      do {
        arguments.push_back(use());
      } while (accept(','));
      expect(')');
    }
    int arity = program_.helpers[static_cast<size_t>(helper)].arity;
    if (static_cast<int>(arguments.size()) != arity) {
      fail_at(name_at, "helper " + name + " takes " + std::to_string(arity) +
                           " arguments, the call passes " + std::to_string(arguments.size()));
    }
    return program_.call(helper, std::move(arguments));
  }

  // Instructions that define nothing: store and the checks.
  void statement(GlueOp op) {
    if (op == GlueOp::Store) {
      int64_t slot = number("a slot index");
      expect(',');
      program_.store(slot, use());
      return;
    }
    int a = use();
    int b = -1;
    if (op != GlueOp::CheckNonZero) {
      expect(',');
      b = use();
    }
    expect_word("else");
    int64_t fail_code = number("a failure code");
    switch (op) {
      case GlueOp::CheckEq:
        program_.check_eq(a, b, fail_code);
        break;
      case GlueOp::CheckNe:
        program_.check_ne(a, b, fail_code);
        break;
      case GlueOp::CheckUlt:
        program_.check_ult(a, b, fail_code);
        break;
      default:
        program_.check_nonzero(a, fail_code);
        break;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  GlueProgram program_;
  std::map<std::string, int> values_;  // the input's value names to value numbers
};

}  // namespace

Expected<GlueProgram> parse_glue_program(std::string_view text) {
  try {
    return Parser(text).parse();
  } catch (const ParseFailure& failure) {
    return make_error(failure.message);
  }
}

}  // namespace dynvm::codegen
