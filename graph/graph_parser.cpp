// A recursive-descent parser for the graph text format, reporting errors as line:column.
#include "dynvm/graph/graph_parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dynvm/graph/check.h"

namespace dynvm::graph {

namespace {

// Deeper lists than ATen ever takes are refused rather than recursed into, so garbled
// input cannot exhaust the stack.
constexpr int kMaxListDepth = 32;

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word_char(char c) { return is_letter(c) || is_digit(c); }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expected<Graph> parse() {
    if (!parse_symbols() || !parse_header() || !parse_body()) return *error_;
    return std::move(graph_);
  }

 private:
  struct Definition {
    Value* value;
    size_t offset;
  };

  // --- low-level reading
  bool at_end() const { return pos_ >= text_.size(); }
  char peek_char() const { return at_end() ? '\0' : text_[pos_]; }

  // Skips whitespace and comments (# to the end of the line).
  void skip_space() {
    while (!at_end()) {
      char c = text_[pos_];
      if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // After skipping space: true, consuming `c`, when it comes next.
  bool consume(char c) {
    skip_space();
    if (peek_char() != c || at_end()) return false;
    ++pos_;
    return true;
  }

  bool expect(char c, const std::string& context) {
    if (consume(c)) return true;
    return fail(std::string("expected '") + c + "' " + context + ", found " + describe_next());
  }

  // [A-Za-z_][A-Za-z0-9_]* after skipping space; empty (consuming nothing) when absent.
  std::string_view read_word() {
    skip_space();
    size_t start = pos_;
    if (at_end() || !is_letter(text_[pos_])) return {};
    while (!at_end() && is_word_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Consumes the word `word` when it comes next.
  bool consume_word(std::string_view word) {
    size_t saved = pos_;
    if (read_word() == word) return true;
    pos_ = saved;
    return false;
  }

  // What comes next, for error messages.
  std::string describe_next() {
    skip_space();
    if (at_end()) return "end of input";
    char c = text_[pos_];
    size_t end = pos_ + 1;
    if (is_word_char(c) || c == '%' || c == '-') {
      while (end < text_.size() && end - pos_ < 40 &&
             (is_word_char(text_[end]) || text_[end] == '.')) {
        ++end;
      }
    }
    std::string token(text_.substr(pos_, end - pos_));
    for (char t : token) {
      auto byte = static_cast<unsigned char>(t);
      if (byte < 0x20 || byte >= 0x7f) {
        static constexpr char kHex[] = "0123456789abcdef";
        return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 0xf];
      }
    }
    return "'" + token + "'";
  }

  bool fail(std::string message) {
    skip_space();
    return fail_at(pos_, std::move(message));
  }

  bool fail_at(size_t offset, std::string message) {
    if (!error_) error_ = make_error(location(offset) + ": " + message);
    return false;
  }

  // "line:column", both counted from 1, columns in bytes.
  std::string location(size_t offset) const {
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return std::to_string(line) + ":" + std::to_string(offset - line_start + 1);
  }

  // --- numbers
  struct Number {
    bool is_double = false;
    int64_t int_value = 0;
    double double_value = 0;
  };

  // -?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?, or -inf; inf and nan are words.
  bool read_number(Number& number, const std::string& what) {
    skip_space();
    size_t start = pos_;
    size_t p = pos_;
    if (p < text_.size() && text_[p] == '-') ++p;
    if (text_.compare(p, 3, "inf") == 0 && (p + 3 >= text_.size() || !is_word_char(text_[p + 3]))) {
      pos_ = p + 3;
      number.is_double = true;
      number.double_value = -std::numeric_limits<double>::infinity();
      return true;
    }
    auto digits = [&]() {
      size_t first = p;
      while (p < text_.size() && is_digit(text_[p])) ++p;
      return p > first;
    };
    if (!digits()) return fail("expected " + what + ", found " + describe_next());
    if (p < text_.size() && text_[p] == '.') {
      ++p;
      number.is_double = true;
      if (!digits()) return fail_at(p, "expected digits after '.' in a number");
    }
    if (p < text_.size() && (text_[p] == 'e' || text_[p] == 'E')) {
      ++p;
      number.is_double = true;
      if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (!digits()) return fail_at(p, "expected digits in the exponent of a number");
    }
    if (p < text_.size() && (is_word_char(text_[p]) || text_[p] == '.')) {
      return fail_at(start,
                     "malformed number '" + std::string(text_.substr(start, p + 1 - start)) + "'");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + p;
    if (number.is_double) {
      auto [end, error] = std::from_chars(first, last, number.double_value);
      if (error != std::errc() || end != last) {
        return fail_at(start, "floating-point literal out of range");
      }
    } else {
      auto [end, error] = std::from_chars(first, last, number.int_value);
      if (error != std::errc() || end != last)
        return fail_at(start, "integer literal out of range");
    }
    pos_ = p;
    return true;
  }

  bool read_int(int64_t& value, const std::string& what) {
    skip_space();
    size_t start = pos_;
    Number number;
    if (!read_number(number, what)) return false;
    if (number.is_double)
      return fail_at(start, "expected " + what + ", found a floating-point number");
    value = number.int_value;
    return true;
  }

  // --- names
  // %name after skipping space, the name being [A-Za-z0-9_]+.
  bool read_percent_name(std::string& name, const std::string& what) {
    skip_space();
    if (peek_char() != '%') return fail("expected " + what + ", found " + describe_next());
    size_t p = pos_ + 1;
    while (p < text_.size() && is_word_char(text_[p])) ++p;
    if (p == pos_ + 1) return fail_at(pos_ + 1, "expected a value name after '%'");
    name = std::string(text_.substr(pos_ + 1, p - pos_ - 1));
    pos_ = p;
    return true;
  }

  bool check_not_defined(const std::string& name, size_t offset) {
    auto it = definitions_.find(name);
    if (it == definitions_.end()) return true;
    return fail_at(offset, "%" + name + " is already defined at " + location(it->second.offset));
  }

  bool read_value_ref(Value*& value) {
    skip_space();
    size_t start = pos_;
    std::string name;
    if (!read_percent_name(name, "a value")) return false;
    auto it = definitions_.find(name);
    if (it == definitions_.end()) return fail_at(start, "use of undefined value %" + name);
    value = it->second.value;
    return true;
  }

  // --- types
  bool parse_type(ValueType& type) {
    skip_space();
    size_t start = pos_;
    std::string_view word = read_word();
    if (word.empty()) {
      return fail("expected a type (f32[2, 3] cpu, Tensor, Tensor[], int, float, bool), found " +
                  describe_next());
    }
    skip_space();
    std::optional<DType> dtype = parse_dtype_short_name(word);
    if (dtype && peek_char() == '[') return parse_tensor_type(*dtype, type);
    if (word == "Tensor") {
      type = ValueType::of(ValueKind::Tensor);
      if (consume('[')) {
        if (!expect(']', "in 'Tensor[]'")) return false;
        type = ValueType::of(ValueKind::TensorList);
      }
      return true;
    }
    if (word == "int") {
      type = ValueType::of(ValueKind::Int);
    } else if (word == "float") {
      type = ValueType::of(ValueKind::Float);
    } else if (word == "bool") {
      type = ValueType::of(ValueKind::Bool);
    } else if (dtype) {
      return fail("expected '[' after the dtype " + std::string(word) + ", found " +
                  describe_next());
    } else {
      return fail_at(start, "unknown type '" + std::string(word) + "'");
    }
    return true;
  }

  bool parse_int_list(char close, std::vector<int64_t>& items, const std::string& what) {
    skip_space();
    if (consume(close)) return true;
    while (true) {
      int64_t item = 0;
      if (!read_int(item, what)) return false;
      items.push_back(item);
      if (consume(close)) return true;
      if (!expect(',', std::string("or '") + close + "' in a list of " + what + "s")) return false;
    }
  }

  bool parse_tensor_type(DType dtype, ValueType& type) {
    TensorMeta meta;
    meta.dtype = dtype;
    if (!expect('[', "before the sizes")) return false;
    skip_space();
    size_t sizes_at = pos_;
    std::vector<SymExpr> sizes;
    if (!parse_expr_list(']', sizes, "size")) return false;
    bool symbolic = false;
    if (!hint_values(sizes, meta.sizes, symbolic, sizes_at)) return false;
    for (int64_t size : meta.sizes) {
      if (size < 0) return fail_at(sizes_at, "sizes must not be negative");
    }
    std::vector<SymExpr> strides;
    if (consume('{')) {
      skip_space();
      size_t strides_at = pos_;
      if (!parse_expr_list('}', strides, "stride")) return false;
      if (strides.size() != sizes.size()) {
        return fail_at(strides_at, "expected " + std::to_string(sizes.size()) +
                                       " strides (one per size), found " +
                                       std::to_string(strides.size()));
      }
      if (!hint_values(strides, meta.strides, symbolic, strides_at)) return false;
    } else {
      strides = row_major_sym_strides(sizes);
      meta.strides = row_major_strides(meta.sizes);
    }
    if (symbolic) {
      meta.sym_sizes = std::move(sizes);
      meta.sym_strides = std::move(strides);
    }
    if (!parse_device(meta.device, "a device (cpu, cuda:0, meta) after the tensor sizes")) {
      return false;
    }
    meta.requires_grad = consume_word("grad");
    type = ValueType::tensor(std::move(meta));
    return true;
  }

  bool parse_device(Device& device, const std::string& what) {
    skip_space();
    size_t start = pos_;
    std::string_view word = read_word();
    std::optional<DeviceType> device_type = parse_device_type(word);
    if (!device_type) {
      pos_ = start;
      return fail("expected " + what + ", found " + describe_next());
    }
    device = Device{*device_type, -1};
    if (!consume(':')) return true;
    skip_space();
    size_t index_at = pos_;
    int64_t index = 0;
    if (!read_int(index, "a device index")) return false;
    if (index < 0 || index > Device::kMaxIndex)
      return fail_at(index_at, "device index out of range");
    device.index = static_cast<int32_t>(index);
    return true;
  }

  // --- dynamic shapes: `symbol s0 = 7 from "L['x'].size()[1]"` and `assume s0 > 256`
  // lines before the header, symbols numbered in order.
  bool parse_symbols() {
    while (true) {
      skip_space();
      size_t start = pos_;
      std::string_view word = read_word();
      if (word == "symbol") {
        skip_space();
        size_t name_at = pos_;
        std::string_view name = read_word();
        std::string expected = "s" + std::to_string(graph_.symbols().size());
        if (name != expected) {
          return fail_at(name_at, "expected the symbol " + expected +
                                      " (symbols are numbered "
                                      "in order), found '" +
                                      std::string(name) + "'");
        }
        if (!expect('=', "after the symbol's name")) return false;
        skip_space();
        int64_t hint = 0;
        if (!read_int(hint, "the symbol's value at the trace")) return false;
        if (!consume_word("from")) return fail("expected 'from' after the symbol's value");
        skip_space();
        std::string source;
        if (!parse_string(source)) return false;
        graph_.add_symbol(std::move(source), hint);
      } else if (word == "assume") {
        skip_space();
        size_t at = pos_;
        while (!at_end() && text_[pos_] != '\n' && text_[pos_] != '#') ++pos_;
        Expected<SymRelation> relation = parse_sym_relation(text_.substr(at, pos_ - at));
        if (!relation) return fail_at(at, relation.error().message);
        if (!check_symbols(*relation, at)) return false;
        graph_.add_relation(std::move(*relation));
      } else {
        pos_ = start;
        return true;
      }
    }
  }

  bool check_symbols(const SymRelation& relation, size_t at) {
    return check_symbols(relation.lhs, at) && check_symbols(relation.rhs, at);
  }

  bool check_symbols(const SymExpr& expr, size_t at) {
    for (int32_t id : expr.symbols()) {
      if (static_cast<size_t>(id) >= graph_.symbols().size()) {
        return fail_at(at, "s" + std::to_string(id) + " is not a declared symbol");
      }
    }
    return true;
  }

  // A SymExpr running to the next `,` or closing bracket outside parentheses.
  bool parse_expr_item(SymExpr& out, const std::string& what) {
    skip_space();
    size_t start = pos_;
    int depth = 0;
    while (!at_end()) {
      char c = text_[pos_];
      if (c == '(') ++depth;
      if (c == ')' && depth-- == 0) break;
      if (depth == 0 && (c == ',' || c == ']' || c == '}' || c == '\n')) break;
      ++pos_;
    }
    if (pos_ == start) return fail_at(start, "expected " + what + ", found " + describe_next());
    Expected<SymExpr> expr = parse_sym_expr(text_.substr(start, pos_ - start));
    if (!expr) return fail_at(start, "in " + what + ": " + expr.error().message);
    if (!check_symbols(*expr, start)) return false;
    out = std::move(*expr);
    return true;
  }

  bool parse_expr_list(char close, std::vector<SymExpr>& items, const std::string& what) {
    if (consume(close)) return true;
    while (true) {
      SymExpr item;
      if (!parse_expr_item(item, "a " + what)) return false;
      items.push_back(std::move(item));
      if (consume(close)) return true;
      if (!expect(',', std::string("or '") + close + "' in a list of " + what + "s")) return false;
    }
  }

  // Concrete values of `exprs` at the symbols' hints, into `out`; `symbolic` tells whether
  // any of them reads a symbol.
  bool hint_values(const std::vector<SymExpr>& exprs, std::vector<int64_t>& out, bool& symbolic,
                   size_t at) {
    std::vector<int64_t> hints = graph_.symbol_hints();
    out.clear();
    for (const SymExpr& e : exprs) {
      symbolic = symbolic || !e.is_constant();
      std::optional<int64_t> v = e.evaluate(hints);
      if (!v) return fail_at(at, "cannot evaluate " + e.to_string() + " at the symbols' values");
      out.push_back(*v);
    }
    return true;
  }

  // --- header: graph(%x: f32[2] cpu, ...):
  bool parse_header() {
    skip_space();
    if (!consume_word("graph")) return fail("expected 'graph', found " + describe_next());
    if (!expect('(', "after 'graph'")) return false;
    if (consume(')')) return expect(':', "after the graph inputs");
    while (true) {
      skip_space();
      size_t start = pos_;
      std::string name;
      if (!read_percent_name(name, "a graph input (%name: type)")) return false;
      if (!is_valid_input_name(name)) {
        return fail_at(start, "graph input names must start with a letter or '_': %" + name);
      }
      if (!check_not_defined(name, start)) return false;
      if (!expect(':', "after the input name %" + name)) return false;
      ValueType type;
      if (!parse_type(type)) return false;
      definitions_[name] = Definition{graph_.add_input(name, std::move(type)), start};
      if (consume(')')) break;
      if (!expect(',', "or ')' after a graph input")) return false;
    }
    return expect(':', "after the graph inputs");
  }

  // --- body: nodes, then return (...)
  bool parse_body() {
    while (true) {
      skip_space();
      if (peek_char() == '%') {
        if (!parse_node_with_outputs()) return false;
        continue;
      }
      size_t start = pos_;
      std::string_view word = read_word();
      if (word == "return") return parse_return();
      if (word.empty()) return fail("expected a node or 'return', found " + describe_next());
      pos_ = start;
      if (!parse_node({})) return false;
    }
  }

  struct PendingOutput {
    std::string name;
    size_t offset;
    ValueType type;
  };

  bool parse_node_with_outputs() {
    std::vector<PendingOutput> outputs;
    while (true) {
      skip_space();
      size_t start = pos_;
      std::string name;
      if (!read_percent_name(name, "an output value (%name: type)")) return false;
      if (!check_not_defined(name, start)) return false;
      for (const PendingOutput& other : outputs) {
        if (other.name == name) {
          return fail_at(start, "%" + name + " is already defined at " + location(other.offset));
        }
      }
      if (!expect(':', "after the output name %" + name)) return false;
      ValueType type;
      if (!parse_type(type)) return false;
      outputs.push_back(PendingOutput{std::move(name), start, std::move(type)});
      if (consume('=')) break;
      if (!expect(',', "or '=' after an output type")) return false;
    }
    return parse_node(std::move(outputs));
  }

  // ns::name or ns::name.overload
  bool parse_op_name(std::string& op) {
    skip_space();
    std::string_view ns = read_word();
    if (ns.empty()) {
      return fail("expected an operator name (aten::add.Tensor), found " + describe_next());
    }
    if (text_.compare(pos_, 2, "::") != 0) {
      return fail_at(pos_, "expected '::' after the operator namespace '" + std::string(ns) +
                               "', found " + describe_next());
    }
    pos_ += 2;
    if (at_end() || !is_letter(text_[pos_])) {
      return fail_at(pos_, "expected an operator name after '" + std::string(ns) + "::', found " +
                               describe_next());
    }
    std::string_view name = read_word();
    op = std::string(ns) + "::" + std::string(name);
    if (pos_ < text_.size() && text_[pos_] == '.') {
      size_t p = pos_ + 1;
      while (p < text_.size() && is_word_char(text_[p])) ++p;
      if (p == pos_ + 1) return fail_at(p, "expected an overload name after '.' in " + op);
      op += std::string(text_.substr(pos_, p - pos_));
      pos_ = p;
    }
    return true;
  }

  bool parse_node(std::vector<PendingOutput> outputs) {
    std::string op;
    if (!parse_op_name(op)) return false;
    if (!expect('(', "after the operator name " + op)) return false;
    std::vector<Argument> args;
    std::vector<KeywordArgument> kwargs;
    if (!consume(')')) {
      while (true) {
        if (!parse_one_argument(op, args, kwargs)) return false;
        if (consume(')')) break;
        if (!expect(',', "or ')' after an argument of " + op)) return false;
      }
    }
    std::vector<ValueType> types;
    for (PendingOutput& out : outputs) types.push_back(out.type);
    Node* node = graph_.append(op, std::move(args), std::move(types), std::move(kwargs));
    for (size_t i = 0; i < outputs.size(); ++i) {
      definitions_[outputs[i].name] = Definition{node->output(i), outputs[i].offset};
    }
    return true;
  }

  bool parse_one_argument(const std::string& op, std::vector<Argument>& args,
                          std::vector<KeywordArgument>& kwargs) {
    skip_space();
    size_t start = pos_;
    std::string_view word = read_word();
    if (!word.empty() && consume('=')) {
      for (const KeywordArgument& k : kwargs) {
        if (k.name == word) {
          return fail_at(start,
                         "keyword argument '" + std::string(word) + "' given twice to " + op);
        }
      }
      Argument value;
      if (!parse_argument(value, 0)) return false;
      kwargs.push_back(KeywordArgument{std::string(word), std::move(value)});
      return true;
    }
    pos_ = start;
    if (!kwargs.empty()) {
      skip_space();
      return fail("positional argument after keyword arguments of " + op);
    }
    Argument value;
    if (!parse_argument(value, 0)) return false;
    args.push_back(std::move(value));
    return true;
  }

  bool parse_argument(Argument& argument, int depth) {
    skip_space();
    size_t start = pos_;
    char c = peek_char();
    if (at_end()) return fail("expected an argument, found end of input");
    if (c == '%') {
      Value* value = nullptr;
      if (!read_value_ref(value)) return false;
      argument = Argument(value);
      return true;
    }
    if (c == '[') return parse_list(argument, depth);
    if (c == '"') {
      std::string text;
      if (!parse_string(text)) return false;
      argument = Argument::string(std::move(text));
      return true;
    }
    if (c == '-' || is_digit(c)) {
      Number number;
      if (!read_number(number, "a number")) return false;
      argument = number.is_double ? Argument::real(number.double_value)
                                  : Argument::integer(number.int_value);
      return true;
    }
    std::string_view word = read_word();
    if (word == "sym" && consume('(')) {
      SymExpr expr;
      if (!parse_expr_item(expr, "a symbolic int")) return false;
      if (!expect(')', "after the symbolic int")) return false;
      argument = Argument::sym_int(std::move(expr));
      return true;
    }
    if (word == "None") {
      argument = Argument::none();
    } else if (word == "True" || word == "False") {
      argument = Argument::boolean(word == "True");
    } else if (word == "inf") {
      argument = Argument::real(std::numeric_limits<double>::infinity());
    } else if (word == "nan") {
      argument = Argument::real(std::numeric_limits<double>::quiet_NaN());
    } else if (word == "torch") {
      return parse_torch_constant(argument);
    } else if (parse_device_type(word)) {
      pos_ = start;
      Device device;
      if (!parse_device(device, "a device")) return false;
      argument = Argument::device(device);
    } else {
      pos_ = start;
      return fail(
          "expected an argument (%value, number, string, list, None, True, False, "
          "torch.<constant>, device), found " +
          describe_next());
    }
    return true;
  }

  bool parse_list(Argument& argument, int depth) {
    skip_space();
    if (depth >= kMaxListDepth) {
      return fail("lists nested deeper than " + std::to_string(kMaxListDepth) + " levels");
    }
    ++pos_;  // '['
    std::vector<Argument> items;
    if (!consume(']')) {
      while (true) {
        Argument item;
        if (!parse_argument(item, depth + 1)) return false;
        items.push_back(std::move(item));
        if (consume(']')) break;
        if (!expect(',', "or ']' in a list")) return false;
      }
    }
    argument = Argument::list(std::move(items));
    return true;
  }

  // torch.float32, torch.channels_last, torch.strided (after the word 'torch').
  bool parse_torch_constant(Argument& argument) {
    if (peek_char() != '.')
      return fail_at(pos_, "expected '.' after 'torch', found " + describe_next());
    ++pos_;
    size_t start = pos_;
    if (at_end() || !is_letter(text_[pos_])) {
      return fail_at(pos_, "expected a name after 'torch.', found " + describe_next());
    }
    std::string_view name = read_word();
    if (auto dtype = parse_dtype(name)) {
      argument = Argument::dtype(*dtype);
    } else if (auto format = parse_memory_format(name)) {
      argument = Argument::memory_format(*format);
    } else if (auto layout = parse_layout(name)) {
      argument = Argument::layout(*layout);
    } else {
      return fail_at(start, "unknown constant 'torch." + std::string(name) +
                                "' (expected a dtype, memory format or layout)");
    }
    return true;
  }

  bool parse_string(std::string& out) {
    skip_space();
    size_t start = pos_;
    ++pos_;  // opening quote
    while (true) {
      if (at_end() || text_[pos_] == '\n') return fail_at(start, "unterminated string");
      char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) return fail_at(start, "unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
          out += e;
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'x': {
          int byte = 0;
          for (int i = 0; i < 2; ++i) {
            char h = pos_ < text_.size() ? text_[pos_] : '\0';
            int digit = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
            if (digit < 0) return fail_at(pos_, "expected two hex digits after '\\x'");
            byte = byte * 16 + digit;
            ++pos_;
          }
          out += static_cast<char>(byte);
          break;
        }
        default:
          return fail_at(pos_ - 2, std::string("unknown escape '\\") + e + "' in a string");
      }
    }
  }

  // return (%a, %b), then nothing but space and comments.
  bool parse_return() {
    if (!expect('(', "after 'return'")) return false;
    std::vector<Value*> outputs;
    if (!consume(')')) {
      while (true) {
        Value* value = nullptr;
        if (!read_value_ref(value)) return false;
        outputs.push_back(value);
        if (consume(')')) break;
        if (!expect(',', "or ')' in the returned values")) return false;
      }
    }
    graph_.set_outputs(std::move(outputs));
    skip_space();
    if (!at_end()) return fail("expected end of input after 'return', found " + describe_next());
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  Graph graph_;
  // Looked up by name only, never iterated, so its order does not matter.
  std::unordered_map<std::string, Definition> definitions_;
  std::optional<Error> error_;
};

}  // namespace

Expected<Graph> parse_graph(std::string_view text) {
  try {
    return Parser(text).parse();
  } catch (const InternalError& bug) {
    // A parser bug must not take the process down with it.
    return make_error(bug.what());
  }
}

}  // namespace dynvm::graph
