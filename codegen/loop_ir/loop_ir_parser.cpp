// The loop IR's text parser: recursive descent over characters, errors with line:column.
#include "dynvm/codegen/loop_ir_parser.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace dynvm::codegen {

namespace {

// Thrown inside the parser only; parse_loop_kernel turns it into an Error.
struct ParseFailure {
  std::string message;
};

std::optional<LoopOp> parse_op(std::string_view name) {
#define DYNVM_LOOP_OP_PARSE(e, text, arity) \
  if (name == text) return LoopOp::e;
  DYNVM_LOOP_OPS(DYNVM_LOOP_OP_PARSE)
#undef DYNVM_LOOP_OP_PARSE
  return std::nullopt;
}

std::optional<ReduceKind> parse_reduce_kind(std::string_view name) {
#define DYNVM_REDUCE_KIND_PARSE(e, text) \
  if (name == text) return ReduceKind::e;
  DYNVM_REDUCE_KINDS(DYNVM_REDUCE_KIND_PARSE)
#undef DYNVM_REDUCE_KIND_PARSE
  return std::nullopt;
}

std::optional<BufferRole> parse_role(std::string_view name) {
#define DYNVM_BUFFER_ROLE_PARSE(e, text) \
  if (name == text) return BufferRole::e;
  DYNVM_BUFFER_ROLES(DYNVM_BUFFER_ROLE_PARSE)
#undef DYNVM_BUFFER_ROLE_PARSE
  return std::nullopt;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  LoopKernel parse() {
    expect_word("kernel");
    kernel_.name = identifier("a kernel name");
    expect("(");
    if (!accept(")")) {
      do {
        buffer_declaration();
      } while (accept(","));
      expect(")");
    }
    expect("{");
    block(kernel_.body);
    skip_space();
    if (pos_ != text_.size()) fail("expected end of input after the kernel");
    return std::move(kernel_);
  }

 private:
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
    std::string found =
        pos_ >= text_.size() ? "end of input" : "'" + std::string(text_.substr(pos_, 12)) + "'";
    throw ParseFailure{std::to_string(line) + ":" + std::to_string(column) + ": " + what +
                       ", found " + found};
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool accept(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) == token) {
      pos_ += token.size();
      return true;
    }
    return false;
  }

  void expect(std::string_view token) {
    if (!accept(token)) fail("expected '" + std::string(token) + "'");
  }

  static bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }

  std::string word() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string identifier(const char* what) {
    skip_space();
    size_t start = pos_;
    std::string name = word();
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) {
      pos_ = start;
      fail(std::string("expected ") + what);
    }
    return name;
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

  int64_t integer() {
    skip_space();
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    int64_t value = 0;
    auto result = std::from_chars(text_.data() + start, text_.data() + pos_, value);
    if (start == pos_ || result.ec != std::errc() || result.ptr != text_.data() + pos_) {
      pos_ = start;
      fail("expected an integer");
    }
    return value;
  }

  graph::DType dtype() {
    skip_space();
    size_t start = pos_;
    std::string name = word();
    std::optional<graph::DType> type = graph::parse_dtype_short_name(name);
    if (!type) {
      pos_ = start;
      fail("expected a dtype (f32, i64, bool, ...)");
    }
    return *type;
  }

  void buffer_declaration() {
    expect("@");
    LoopBuffer buffer;
    buffer.name = identifier("a buffer name");
    for (const LoopBuffer& other : kernel_.buffers) {
      if (other.name == buffer.name) fail("buffer @" + buffer.name + " declared twice");
    }
    expect(":");
    buffer.dtype = dtype();
    expect("[");
    buffer.num_elements = integer();
    expect("]");
    skip_space();
    size_t start = pos_;
    std::optional<BufferRole> role = parse_role(word());
    if (!role) {
      pos_ = start;
      fail("expected a buffer role (in, out, temp)");
    }
    buffer.role = *role;
    kernel_.buffers.push_back(std::move(buffer));
  }

  std::string value_name() {
    expect("%");
    size_t start = pos_;
    while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
    if (start == pos_) fail("expected a value name after '%'");
    return std::string(text_.substr(start, pos_ - start));
  }

  ValueId define(const std::string& name) {
    if (values_.count(name)) fail("value %" + name + " defined twice");
    ValueId id = kernel_.new_value();
    values_[name] = id;
    return id;
  }

  ValueId use() {
    size_t start = pos_;
    std::string name = value_name();
    auto it = values_.find(name);
    if (it == values_.end()) {
      pos_ = start;
      skip_space();
      fail("use of undefined value %" + name);
    }
    return it->second;
  }

  int32_t buffer_ref() {
    expect("@");
    std::string name = identifier("a buffer name");
    for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
      if (kernel_.buffers[i].name == name) return static_cast<int32_t>(i);
    }
    fail("unknown buffer @" + name);
  }

  AffineIndex affine_index() {
    AffineIndex index;
    do {
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == '%') {
        index.terms.push_back({use(), 1});
        continue;
      }
      int64_t number = integer();
      if (accept("*")) {
        index.terms.push_back({use(), number});
      } else {
        index.offset += number;
      }
    } while (accept("+"));
    return index;
  }

  void loop_vars(LoopStmt& stmt) {
    do {
      stmt.vars.push_back(define(value_name()));
      expect_word("in");
      if (integer() != 0) fail("loops start at 0");
      expect("..");
      int64_t extent = integer();
      if (extent < 0) fail("a loop extent is not negative");
      stmt.extents.push_back(extent);
    } while (accept(","));
  }

  double literal_real() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string_view token = text_.substr(start, pos_ - start);
    if (token == "inf") return std::numeric_limits<double>::infinity();
    if (token == "-inf") return -std::numeric_limits<double>::infinity();
    if (token == "nan") return std::numeric_limits<double>::quiet_NaN();
    double value = 0;
    auto result = std::from_chars(token.data(), token.data() + token.size(), value);
    if (token.empty() || result.ec != std::errc() || result.ptr != token.data() + token.size()) {
      pos_ = start;
      fail("expected a number");
    }
    return value;
  }

  // Parses statements up to the closing '}' of the block.
  void block(LoopBlock& body, ValueId* yield = nullptr) {
    while (true) {
      if (accept("}")) {
        if (yield && *yield < 0) fail("a reduce body ends with 'yield %value'");
        return;
      }
      skip_space();
      if (pos_ >= text_.size()) fail("expected a statement or '}'");
      if (yield && accept_word("yield")) {
        *yield = use();
        expect("}");
        return;
      }
      body.push_back(statement());
    }
  }

  std::unique_ptr<LoopStmt> statement() {
    auto stmt = std::make_unique<LoopStmt>();
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '%') {
      std::string name = value_name();
      expect(":");
      stmt->type = dtype();
      expect("=");
      skip_space();
      size_t start = pos_;
      std::string op_name = word();
      if (op_name == "reduce") {
        stmt->kind = LoopStmtKind::Reduce;
        skip_space();
        size_t kind_start = pos_;
        std::optional<ReduceKind> kind = parse_reduce_kind(word());
        if (!kind) {
          pos_ = kind_start;
          fail("expected a reduction kind (sum, max, min)");
        }
        stmt->reduce = *kind;
        expect_word("for");
        loop_vars(*stmt);
        expect("{");
        block(stmt->body, &stmt->yield);
        stmt->result = define(name);
        return stmt;
      }
      std::optional<LoopOp> op = parse_op(op_name);
      if (!op) {
        pos_ = start;
        skip_space();
        fail("expected an operator");
      }
      stmt->kind = LoopStmtKind::Instr;
      stmt->op = *op;
      if (*op == LoopOp::Const) {
        if (graph::is_floating(stmt->type)) {
          stmt->real = literal_real();
        } else {
          stmt->integer = integer();
        }
      } else if (*op == LoopOp::Load) {
        stmt->buffer = buffer_ref();
        expect("[");
        stmt->index = affine_index();
        expect("]");
      } else {
        for (int i = 0; i < loop_op_arity(*op); ++i) {
          if (i) expect(",");
          stmt->operands.push_back(use());
        }
      }
      stmt->result = define(name);
      return stmt;
    }
    if (accept_word("store")) {
      stmt->kind = LoopStmtKind::Store;
      stmt->buffer = buffer_ref();
      expect("[");
      stmt->index = affine_index();
      expect("]");
      expect("=");
      stmt->operands.push_back(use());
      return stmt;
    }
    if (accept_word("parallel")) stmt->parallel = true;
    if (accept_word("for")) {
      stmt->kind = LoopStmtKind::For;
      loop_vars(*stmt);
      if (stmt->vars.size() != 1) fail("a for loop has one variable");
      expect("{");
      block(stmt->body);
      return stmt;
    }
    fail(stmt->parallel ? "expected 'for' after 'parallel'" : "expected a statement");
  }

  std::string_view text_;
  size_t pos_ = 0;
  LoopKernel kernel_;
  std::map<std::string, ValueId> values_;
};

}  // namespace

Expected<LoopKernel> parse_loop_kernel(std::string_view text) {
  try {
    return Parser(text).parse();
  } catch (const ParseFailure& failure) {
    return make_error(failure.message);
  }
}

}  // namespace dynvm::codegen
