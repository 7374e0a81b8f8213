// SymExpr's arithmetic in canonical form, its printer and its parser.
#include "dynvm/graph/sym_expr.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace dynvm::graph {

namespace {

// Python's // and % on integers (b != 0).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

bool SymExpr::atom_equal(const Atom& a, const Atom& b) {
  if (a.kind != b.kind || a.symbol != b.symbol) return false;
  if (a.kind == Atom::Kind::Symbol) return true;
  return *a.lhs == *b.lhs && *a.rhs == *b.rhs;
}

bool SymExpr::atom_less(const Atom& a, const Atom& b) {
  if (a.kind != b.kind) return a.kind < b.kind;
  if (a.kind == Atom::Kind::Symbol) return a.symbol < b.symbol;
  if (*a.lhs != *b.lhs) return *a.lhs < *b.lhs;
  return *a.rhs < *b.rhs;
}

SymExpr SymExpr::constant(int64_t value) {
  SymExpr e;
  e.add_term({}, value);
  return e;
}

SymExpr SymExpr::symbol(int32_t id) {
  Atom a;
  a.symbol = id;
  return atom(std::move(a));
}

SymExpr SymExpr::atom(Atom a) {
  SymExpr e;
  e.add_term({{std::move(a), 1}}, 1);
  return e;
}

void SymExpr::add_term(const Monomial& monomial, int64_t coefficient) {
  if (coefficient == 0) return;
  int64_t& c = terms_[monomial];
  c += coefficient;
  if (c == 0) terms_.erase(monomial);
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  SymExpr out = a;
  for (const auto& [monomial, c] : b.terms_) out.add_term(monomial, c);
  return out;
}

SymExpr SymExpr::operator-() const {
  SymExpr out;
  for (const auto& [monomial, c] : terms_) out.add_term(monomial, -c);
  return out;
}

SymExpr operator-(const SymExpr& a, const SymExpr& b) { return a + (-b); }

SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  SymExpr out;
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      // Merge the two sorted monomials, adding exponents of equal atoms.
      SymExpr::Monomial m;
      size_t i = 0, j = 0;
      while (i < ma.size() || j < mb.size()) {
        if (j == mb.size() || (i < ma.size() && ma[i].first < mb[j].first)) {
          m.push_back(ma[i++]);
        } else if (i == ma.size() || mb[j].first < ma[i].first) {
          m.push_back(mb[j++]);
        } else {
          m.emplace_back(ma[i].first, ma[i].second + mb[j].second);
          ++i;
          ++j;
        }
      }
      out.add_term(m, ca * cb);
    }
  }
  return out;
}

int64_t SymExpr::constant_term() const {
  auto it = terms_.find(Monomial{});
  return it == terms_.end() ? 0 : it->second;
}

bool SymExpr::non_constant_coefficients_divisible_by(int64_t divisor) const {
  return std::all_of(terms_.begin(), terms_.end(), [&](const auto& term) {
    return term.first.empty() || term.second % divisor == 0;
  });
}

SymExpr SymExpr::floordiv(const SymExpr& a, const SymExpr& b) {
  std::optional<int64_t> c = b.constant_value();
  if (c && *c != 0) {
    if (*c == 1) return a;
    if (auto value = a.constant_value()) return constant(floor_div(*value, *c));
    // (c*m + r) // c == m + r // c for an integer-valued m.
    if (a.non_constant_coefficients_divisible_by(*c)) {
      SymExpr quotient = constant(floor_div(a.constant_term(), *c));
      for (const auto& [monomial, coefficient] : a.terms_) {
        if (!monomial.empty()) quotient.add_term(monomial, coefficient / *c);
      }
      return quotient;
    }
  }
  Atom d;
  d.kind = Atom::Kind::FloorDiv;
  d.lhs = std::make_shared<const SymExpr>(a);
  d.rhs = std::make_shared<const SymExpr>(b);
  return atom(std::move(d));
}

SymExpr SymExpr::mod(const SymExpr& a, const SymExpr& b) {
  std::optional<int64_t> c = b.constant_value();
  if (c && *c != 0) {
    if (*c == 1 || *c == -1) return SymExpr();
    if (auto value = a.constant_value()) return constant(floor_mod(*value, *c));
    // (c*m + r) % c == r % c.
    if (a.non_constant_coefficients_divisible_by(*c)) {
      return constant(floor_mod(a.constant_term(), *c));
    }
  }
  Atom r;
  r.kind = Atom::Kind::Mod;
  r.lhs = std::make_shared<const SymExpr>(a);
  r.rhs = std::make_shared<const SymExpr>(b);
  return atom(std::move(r));
}

SymExpr SymExpr::extremum(bool maximum, const SymExpr& a, const SymExpr& b) {
  if (a == b) return a;
  auto x = a.constant_value();
  auto y = b.constant_value();
  if (x && y) return constant(maximum ? std::max(*x, *y) : std::min(*x, *y));
  Atom m;
  m.kind = maximum ? Atom::Kind::Max : Atom::Kind::Min;
  // Commutative: operands in canonical order, so max(a, b) and max(b, a) compare equal.
  bool swap = b < a;
  m.lhs = std::make_shared<const SymExpr>(swap ? b : a);
  m.rhs = std::make_shared<const SymExpr>(swap ? a : b);
  return atom(std::move(m));
}

SymExpr SymExpr::max(const SymExpr& a, const SymExpr& b) { return extremum(true, a, b); }
SymExpr SymExpr::min(const SymExpr& a, const SymExpr& b) { return extremum(false, a, b); }

std::optional<int64_t> SymExpr::constant_value() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty()) return terms_.begin()->second;
  return std::nullopt;
}

std::vector<int32_t> SymExpr::symbols() const {
  std::set<int32_t> found;
  for (const auto& [monomial, c] : terms_) {
    for (const auto& [a, exponent] : monomial) {
      if (a.kind == Atom::Kind::Symbol) {
        found.insert(a.symbol);
      } else {
        for (int32_t s : a.lhs->symbols()) found.insert(s);
        for (int32_t s : a.rhs->symbols()) found.insert(s);
      }
    }
  }
  return {found.begin(), found.end()};
}

std::optional<int64_t> SymExpr::evaluate(const std::vector<int64_t>& values) const {
  int64_t total = 0;
  for (const auto& [monomial, c] : terms_) {
    int64_t product = c;
    for (const auto& [a, exponent] : monomial) {
      std::optional<int64_t> v;
      if (a.kind == Atom::Kind::Symbol) {
        if (a.symbol < 0 || static_cast<size_t>(a.symbol) >= values.size()) return std::nullopt;
        v = values[static_cast<size_t>(a.symbol)];
      } else {
        std::optional<int64_t> l = a.lhs->evaluate(values);
        std::optional<int64_t> r = a.rhs->evaluate(values);
        if (!l || !r) return std::nullopt;
        if (a.kind == Atom::Kind::Max || a.kind == Atom::Kind::Min) {
          v = a.kind == Atom::Kind::Max ? std::max(*l, *r) : std::min(*l, *r);
        } else {
          if (*r == 0) return std::nullopt;
          v = a.kind == Atom::Kind::FloorDiv ? floor_div(*l, *r) : floor_mod(*l, *r);
        }
      }
      for (int32_t e = 0; e < exponent; ++e) product *= *v;
    }
    total += product;
  }
  return total;
}

std::string SymExpr::atom_text(const Atom& a) {
  if (a.kind == Atom::Kind::Symbol) return "s" + std::to_string(a.symbol);
  // Bare: a constant >= 0 or a lone atom; anything else in parentheses.
  auto operand = [](const SymExpr& e) {
    std::string text = e.to_string();
    std::optional<int64_t> value = e.constant_value();
    bool lone_atom = e.terms_.size() == 1 && e.terms_.begin()->second == 1 &&
                     e.terms_.begin()->first.size() == 1 && e.terms_.begin()->first[0].second == 1;
    return (value && *value >= 0) || lone_atom ? text : "(" + text + ")";
  };
  if (a.kind == Atom::Kind::Max || a.kind == Atom::Kind::Min) {
    return std::string(a.kind == Atom::Kind::Max ? "max(" : "min(") + a.lhs->to_string() + ", " +
           a.rhs->to_string() + ")";
  }
  return "(" + operand(*a.lhs) + (a.kind == Atom::Kind::FloorDiv ? " // " : " % ") +
         operand(*a.rhs) + ")";
}

std::string SymExpr::to_string() const {
  if (terms_.empty()) return "0";
  std::string out;
  auto write = [&](const Monomial& monomial, int64_t c) {
    bool first = out.empty();
    if (c < 0) {
      out += first ? "-" : " - ";
    } else if (!first) {
      out += " + ";
    }
    uint64_t magnitude = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    std::string factors;
    for (const auto& [a, exponent] : monomial) {
      if (!factors.empty()) factors += "*";
      factors += atom_text(a);
      if (exponent > 1) factors += "**" + std::to_string(exponent);
    }
    if (factors.empty()) {
      out += std::to_string(magnitude);
    } else {
      if (magnitude != 1) out += std::to_string(magnitude) + "*";
      out += factors;
    }
  };
  // Higher degrees first, then the canonical order; the constant last.
  std::vector<std::pair<const Monomial*, int64_t>> order;
  for (const auto& [monomial, c] : terms_) {
    if (!monomial.empty()) order.emplace_back(&monomial, c);
  }
  auto degree = [](const Monomial& m) {
    int64_t d = 0;
    for (const auto& factor : m) d += factor.second;
    return d;
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return degree(*a.first) > degree(*b.first);
  });
  for (const auto& [monomial, c] : order) write(*monomial, c);
  if (int64_t c = constant_term(); c != 0) write({}, c);
  return out;
}

namespace {

// expr := term (('+' | '-') term)*; term := unary (('*' | '//' | '%') unary)*;
// unary := '-' unary | power; power := primary ('**' integer)?;
// primary := integer | 's' integer | '(' expr ')' | ('max' | 'min') '(' expr ',' expr ')'.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expected<SymExpr> parse() {
    SymExpr e = expr();
    skip_spaces();
    if (error_.empty() && at_ != text_.size()) fail("an operator or the end");
    if (!error_.empty()) return make_error(error_);
    return e;
  }

 private:
  void skip_spaces() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool eat(std::string_view token) {
    skip_spaces();
    if (text_.substr(at_, token.size()) != token) return false;
    at_ += token.size();
    return true;
  }
  void fail(const std::string& expected) {
    if (!error_.empty()) return;
    error_ = "cannot parse the size expression '" + std::string(text_) + "': expected " + expected +
             " at column " + std::to_string(at_ + 1);
  }
  std::optional<int64_t> integer() {
    skip_spaces();
    size_t start = at_;
    int64_t value = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      if (value > (INT64_MAX - 9) / 10) {
        at_ = start;
        fail("an integer that fits in 64 bits");
        return std::nullopt;
      }
      value = value * 10 + (text_[at_++] - '0');
    }
    if (at_ == start) return std::nullopt;
    return value;
  }

  SymExpr expr() {
    SymExpr e = term();
    while (error_.empty()) {
      if (eat("+")) {
        e = e + term();
      } else if (eat("-")) {
        e = e - term();
      } else {
        break;
      }
    }
    return e;
  }
  SymExpr term() {
    SymExpr e = unary();
    while (error_.empty()) {
      if (eat("**")) {  // a power binds tighter; reaching it here means a misplaced one
        fail("an operand before '**'");
      } else if (eat("*")) {
        e = e * unary();
      } else if (eat("//")) {
        e = SymExpr::floordiv(e, unary());
      } else if (eat("%")) {
        e = SymExpr::mod(e, unary());
      } else {
        break;
      }
    }
    return e;
  }
  SymExpr unary() {
    if (eat("-")) return -unary();
    return power();
  }
  SymExpr power() {
    SymExpr base = primary();
    skip_spaces();
    if (text_.substr(at_, 2) != "**") return base;
    at_ += 2;
    std::optional<int64_t> exponent = integer();
    if (!exponent || *exponent < 1 || *exponent > 64) {
      fail("an exponent from 1 to 64");
      return base;
    }
    SymExpr out = base;
    for (int64_t i = 1; i < *exponent; ++i) out = out * base;
    return out;
  }
  SymExpr primary() {
    for (const char* name : {"max(", "min("}) {
      if (!eat(name)) continue;
      SymExpr a = expr();
      if (!eat(",")) fail("',' between the operands of " + std::string(name, 3));
      SymExpr b = expr();
      if (!eat(")")) fail("')'");
      return name[1] == 'a' ? SymExpr::max(a, b) : SymExpr::min(a, b);
    }
    if (eat("(")) {
      SymExpr e = expr();
      if (!eat(")")) fail("')'");
      return e;
    }
    if (eat("s")) {
      std::optional<int64_t> id = integer();
      if (!id || *id > INT32_MAX) {
        fail("a symbol number after 's'");
        return {};
      }
      return SymExpr::symbol(static_cast<int32_t>(*id));
    }
    if (std::optional<int64_t> value = integer()) return SymExpr::constant(*value);
    fail("an integer, a symbol (s0, s1, ...) or '('");
    return {};
  }

  std::string_view text_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace

Expected<SymExpr> parse_sym_expr(std::string_view text) { return Parser(text).parse(); }

const char* relation_op_text(SymRelation::Op op) {
  switch (op) {
    case SymRelation::Op::Eq:
      return "==";
    case SymRelation::Op::Ne:
      return "!=";
    case SymRelation::Op::Lt:
      return "<";
    case SymRelation::Op::Le:
      return "<=";
    case SymRelation::Op::Gt:
      return ">";
    case SymRelation::Op::Ge:
      return ">=";
  }
  return "?";
}

std::optional<bool> SymRelation::holds(const std::vector<int64_t>& values) const {
  std::optional<int64_t> a = lhs.evaluate(values);
  std::optional<int64_t> b = rhs.evaluate(values);
  if (!a || !b) return std::nullopt;
  switch (op) {
    case Op::Eq:
      return *a == *b;
    case Op::Ne:
      return *a != *b;
    case Op::Lt:
      return *a < *b;
    case Op::Le:
      return *a <= *b;
    case Op::Gt:
      return *a > *b;
    case Op::Ge:
      return *a >= *b;
  }
  return std::nullopt;
}

std::string SymRelation::to_string() const {
  return lhs.to_string() + " " + relation_op_text(op) + " " + rhs.to_string();
}

Expected<SymRelation> parse_sym_relation(std::string_view text) {
  // The operator is the first of = ! < > outside parentheses (expressions hold none).
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth != 0 || (c != '=' && c != '!' && c != '<' && c != '>')) continue;
    bool two = i + 1 < text.size() && text[i + 1] == '=';
    SymRelation r;
    if (c == '=' && two) {
      r.op = SymRelation::Op::Eq;
    } else if (c == '!' && two) {
      r.op = SymRelation::Op::Ne;
    } else if (c == '<') {
      r.op = two ? SymRelation::Op::Le : SymRelation::Op::Lt;
    } else if (c == '>') {
      r.op = two ? SymRelation::Op::Ge : SymRelation::Op::Gt;
    } else {
      return make_error("expected ==, !=, <, <=, > or >= in the relation '" + std::string(text) +
                        "'");
    }
    Expected<SymExpr> lhs = parse_sym_expr(text.substr(0, i));
    if (!lhs) return lhs.error();
    Expected<SymExpr> rhs = parse_sym_expr(text.substr(i + (two ? 2 : 1)));
    if (!rhs) return rhs.error();
    r.lhs = std::move(*lhs);
    r.rhs = std::move(*rhs);
    return r;
  }
  return make_error("expected a relation (lhs ==, !=, <, <=, > or >= rhs), found '" +
                    std::string(text) + "'");
}

}  // namespace dynvm::graph
