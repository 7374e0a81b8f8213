// SymExpr: an integer expression over size symbols (s0, s1, ...), the type symbolic
// sizes, strides, numels and loop extents are written in (dynamic shapes).
//
// It is kept in one canonical form: a sum of `coefficient * product of atoms`, an atom
// being a symbol or a floor division or remainder that did not simplify. Like terms are
// combined as expressions are built, so equal polynomials compare equal and print alike:
// `(s0 + 1) * (s0 - 1)` is `s0**2 - 1`, `s1*s0 + s0*s1` is `2*s0*s1`. Floor division
// and remainder by a constant fold what divides exactly: `(4*s0 + 6) // 2` is
// `2*s0 + 3`, `(6*s0 + 7) % 3` is `1`. Division and remainder follow Python (floor
// toward negative infinity, a remainder with the divisor's sign).
//
// The text form is the printer's and the parser's, terms of higher degree first and the
// constant last: `2*s0*s1 + s0 - 3`, `s0**2`, `(s0 // 2)`, `((s0 + 1) % 4)`,
// `max(1, (s0 // 4))`. Nothing
// uses it yet: it is the groundwork for symbolic sizes in the graph IR and symbolic
// extents in the loop IR (docs/graph_ir.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dynvm/support/expected.h"

namespace dynvm::graph {

class SymExpr {
 public:
  SymExpr() = default;  // 0
  static SymExpr constant(int64_t value);
  static SymExpr symbol(int32_t id);  // s<id>, id >= 0

  friend SymExpr operator+(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator-(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator*(const SymExpr& a, const SymExpr& b);
  SymExpr operator-() const;
  // Python's a // b and a % b.
  static SymExpr floordiv(const SymExpr& a, const SymExpr& b);
  static SymExpr mod(const SymExpr& a, const SymExpr& b);
  // max(a, b) and min(a, b) (the strides torch computes for sizes that may be 1).
  static SymExpr max(const SymExpr& a, const SymExpr& b);
  static SymExpr min(const SymExpr& a, const SymExpr& b);

  // The value when the expression has no symbol (after simplification), else nullopt.
  std::optional<int64_t> constant_value() const;
  bool is_constant() const { return constant_value().has_value(); }
  // The symbols it reads, ascending, each once.
  std::vector<int32_t> symbols() const;
  // The value with symbol i bound to values[i]; nullopt when a symbol it reads is not
  // bound or a division by zero happens.
  std::optional<int64_t> evaluate(const std::vector<int64_t>& values) const;

  std::string to_string() const;

  friend bool operator==(const SymExpr& a, const SymExpr& b) { return a.terms_ == b.terms_; }
  friend bool operator!=(const SymExpr& a, const SymExpr& b) { return !(a == b); }
  // A total order on the canonical form (for sorting and as a map key).
  friend bool operator<(const SymExpr& a, const SymExpr& b) { return a.terms_ < b.terms_; }

 private:
  struct Atom;
  static bool atom_equal(const Atom& a, const Atom& b);
  static bool atom_less(const Atom& a, const Atom& b);
  // A symbol (`lhs` empty), or lhs // rhs, lhs % rhs, max(lhs, rhs), min(lhs, rhs).
  struct Atom {
    enum class Kind : uint8_t { Symbol, FloorDiv, Mod, Max, Min };
    Kind kind = Kind::Symbol;
    int32_t symbol = -1;
    std::shared_ptr<const SymExpr> lhs;
    std::shared_ptr<const SymExpr> rhs;
    bool operator==(const Atom& b) const { return atom_equal(*this, b); }
    bool operator<(const Atom& b) const { return atom_less(*this, b); }
  };
  // Atoms with their exponents (>= 1), sorted by atom; empty for the constant term.
  using Monomial = std::vector<std::pair<Atom, int32_t>>;

  static SymExpr atom(Atom a);
  static SymExpr extremum(bool maximum, const SymExpr& a, const SymExpr& b);
  void add_term(const Monomial& monomial, int64_t coefficient);
  int64_t constant_term() const;
  // Whether every coefficient of the non-constant terms is a multiple of `divisor`.
  bool non_constant_coefficients_divisible_by(int64_t divisor) const;
  static std::string atom_text(const Atom& a);

  std::map<Monomial, int64_t> terms_;  // no zero coefficient
};

// Parses the printer's text form ("2*s0*s1 + s0 - 3", "(s0 // 2)"); the error says
// what was expected where.
Expected<SymExpr> parse_sym_expr(std::string_view text);

// lhs <op> rhs over SymExprs: a branch the trace took on sizes (`s0 > 256`, `s0 == s1`),
// which every call the graph serves must satisfy.
struct SymRelation {
  enum class Op : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
  SymExpr lhs;
  Op op = Op::Eq;
  SymExpr rhs;

  // Whether it holds with symbol i bound to values[i]; nullopt when it cannot be
  // evaluated (a symbol unbound, a division by zero).
  std::optional<bool> holds(const std::vector<int64_t>& values) const;
  std::string to_string() const;  // "s0 > 256"
  friend bool operator==(const SymRelation& a, const SymRelation& b) {
    return a.op == b.op && a.lhs == b.lhs && a.rhs == b.rhs;
  }
};

// "==", "!=", "<", "<=", ">", ">=".
const char* relation_op_text(SymRelation::Op op);

// Parses "lhs <op> rhs" as the printer writes it.
Expected<SymRelation> parse_sym_relation(std::string_view text);

}  // namespace dynvm::graph
