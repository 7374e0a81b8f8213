// The loop IR verifier: a walk over the statements with the values visible at each point.
#include "dynvm/codegen/loop_ir_verify.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace dynvm::codegen {

namespace {

class Verifier {
 public:
  explicit Verifier(const LoopKernel& kernel) : kernel_(kernel) {}

  std::vector<std::string> run() {
    std::set<std::string> names;
    for (const LoopBuffer& b : kernel_.buffers) {
      if (b.name.empty() || !names.insert(b.name).second) {
        problem("buffer @" + b.name + " is declared twice or has no name");
      }
      if (b.num_elements < 0) problem("buffer @" + b.name + " has a negative size");
    }
    types_.assign(static_cast<size_t>(std::max(kernel_.num_values, 0)), graph::DType::Int64);
    defined_.assign(types_.size(), false);
    int parallel = 0;
    for (const auto& stmt : kernel_.body) {
      if (stmt->kind == LoopStmtKind::For && stmt->parallel) ++parallel;
    }
    if (parallel > 1) problem("more than one parallel loop");
    block(kernel_.body, true, nullptr);
    return problems_;
  }

 private:
  void problem(const std::string& message) { problems_.push_back(message); }

  static std::string name(ValueId v) { return "value " + std::to_string(v); }

  bool valid(ValueId v) const { return v >= 0 && v < kernel_.num_values; }

  void define(ValueId v, graph::DType type, std::vector<ValueId>& scope) {
    if (!valid(v)) {
      problem("definition of " + name(v) + " outside 0.." + std::to_string(kernel_.num_values));
      return;
    }
    if (ever_defined_.count(v)) problem(name(v) + " is defined twice");
    ever_defined_.insert(v);
    defined_[static_cast<size_t>(v)] = true;
    types_[static_cast<size_t>(v)] = type;
    scope.push_back(v);
  }

  // Whether `v` is visible here (reports a problem when not).
  bool use(ValueId v, const char* where) {
    if (!valid(v) || !defined_[static_cast<size_t>(v)]) {
      problem(std::string(where) + " uses " + name(v) + " where it is not defined");
      return false;
    }
    return true;
  }

  graph::DType type(ValueId v) const { return types_[static_cast<size_t>(v)]; }

  void index(const AffineIndex& index, const char* where) {
    for (const AffineIndex::Term& t : index.terms) {
      if (use(t.value, where) && type(t.value) != graph::DType::Int64) {
        problem(std::string(where) + ": index term " + name(t.value) + " is not i64");
      }
    }
  }

  void buffer(int32_t b, const char* where) {
    if (b < 0 || static_cast<size_t>(b) >= kernel_.buffers.size()) {
      problem(std::string(where) + " refers to buffer " + std::to_string(b) + " of " +
              std::to_string(kernel_.buffers.size()));
    }
  }

  void instr(const LoopStmt& s, std::vector<ValueId>& scope) {
    std::string op(loop_op_name(s.op));
    if (s.op == LoopOp::Load) {
      buffer(s.buffer, "load");
      index(s.index, "load");
    } else if (s.op != LoopOp::Const) {
      if (static_cast<int>(s.operands.size()) != loop_op_arity(s.op)) {
        problem(op + " takes " + std::to_string(loop_op_arity(s.op)) + " operands, has " +
                std::to_string(s.operands.size()));
      } else {
        bool all = true;
        for (ValueId v : s.operands) all = use(v, op.c_str()) && all;
        if (all) check_types(s, op);
      }
    }
    define(s.result, s.type, scope);
  }

  static bool needs_float(LoopOp op) {
    switch (op) {
      case LoopOp::Reciprocal:
      case LoopOp::Sqrt:
      case LoopOp::Rsqrt:
      case LoopOp::Exp:
      case LoopOp::Expm1:
      case LoopOp::Log:
      case LoopOp::Log1p:
      case LoopOp::Tanh:
      case LoopOp::Erf:
      case LoopOp::Sigmoid:
      case LoopOp::Sin:
      case LoopOp::Cos:
      case LoopOp::Pow:
        return true;
      default:
        return false;
    }
  }

  void check_types(const LoopStmt& s, const std::string& op) {
    if (s.op == LoopOp::Cast) return;
    if (needs_float(s.op) && !graph::is_floating(s.type)) {
      problem(op + " takes floating-point operands, not " +
              std::string(graph::dtype_short_name(s.type)));
      return;
    }
    if ((s.op == LoopOp::Not || s.op == LoopOp::And || s.op == LoopOp::Or) &&
        graph::is_floating(s.type)) {
      problem(op + " takes bool or integer operands");
      return;
    }
    if (s.op == LoopOp::Select) {
      if (type(s.operands[0]) != graph::DType::Bool) problem("select: the condition is not bool");
      if (type(s.operands[1]) != s.type || type(s.operands[2]) != s.type) {
        problem("select: the operands are not of the result type");
      }
      return;
    }
    if (is_comparison(s.op)) {
      if (s.type != graph::DType::Bool) problem(op + " gives bool");
      if (type(s.operands[0]) != type(s.operands[1])) problem(op + ": operand types differ");
      return;
    }
    for (ValueId v : s.operands) {
      if (type(v) != s.type) {
        problem(op + ": " + name(v) + " is " + std::string(graph::dtype_short_name(type(v))) +
                ", the result " + std::string(graph::dtype_short_name(s.type)));
        return;
      }
    }
  }

  // `reduce`: the reduce whose body this is (its yield must be defined in it).
  void block(const LoopBlock& body, bool top, const LoopStmt* reduce) {
    std::vector<ValueId> scope;
    for (const auto& stmt : body) {
      const LoopStmt& s = *stmt;
      switch (s.kind) {
        case LoopStmtKind::Instr:
          instr(s, scope);
          break;
        case LoopStmtKind::Store:
          buffer(s.buffer, "store");
          index(s.index, "store");
          if (s.operands.size() != 1) {
            problem("store takes one value");
          } else {
            use(s.operands[0], "store");
          }
          break;
        case LoopStmtKind::For:
        case LoopStmtKind::Reduce: {
          if (s.vars.empty() || s.vars.size() != s.extents.size()) {
            problem("a loop needs one extent per variable");
            break;
          }
          if (s.kind == LoopStmtKind::For && s.vars.size() != 1) {
            problem("a for loop has one variable");
          }
          if (s.parallel && !top) problem("a parallel loop is not at the top level");
          for (int64_t e : s.extents) {
            if (e < 0) problem("a loop extent is negative");
          }
          std::vector<ValueId> inner;
          for (ValueId v : s.vars) define(v, graph::DType::Int64, inner);
          block(s.body, false, s.kind == LoopStmtKind::Reduce ? &s : nullptr);
          for (ValueId v : inner) defined_[static_cast<size_t>(v)] = false;
          if (s.kind == LoopStmtKind::Reduce) define(s.result, s.type, scope);
          break;
        }
      }
    }
    if (reduce && use(reduce->yield, "reduce") && type(reduce->yield) != reduce->type) {
      problem("reduce: the yielded value is not of the reduce's type");
    }
    // Values of this block go out of scope; the enclosing blocks' stay.
    for (ValueId v : scope) defined_[static_cast<size_t>(v)] = false;
  }

  const LoopKernel& kernel_;
  std::vector<graph::DType> types_;
  std::vector<bool> defined_;
  std::set<ValueId> ever_defined_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> verify_loop_kernel(const LoopKernel& kernel) {
  return Verifier(kernel).run();
}

}  // namespace dynvm::codegen
