// NodeBuilder: inserts primitive operators at one place of a graph, inferring the
// metadata of each new value — the tool passes use to rewrite a node into others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

class NodeBuilder {
 public:
  // New nodes go just before `position`; nullptr appends them at the end.
  NodeBuilder(Graph& graph, Node* position) : graph_(&graph), position_(position) {}

  Graph& graph() const { return *graph_; }

  // A primitive operator (primitive_ops.h) with its output metadata inferred. Arguments
  // the operator does not accept are a compiler bug (DYNVM_GRAPH_CHECK).
  Value* primitive(std::string op, std::vector<Argument> args,
                   std::vector<KeywordArgument> kwargs = {});
  // Any operator, with the output types given.
  Node* node(std::string op, std::vector<Argument> args, std::vector<ValueType> output_types,
             std::vector<KeywordArgument> kwargs = {});

  // Shorthands of primitive() for the common cases.
  Value* unary(const std::string& op, Value* x) { return primitive(op, {x}); }
  Value* binary(const std::string& op, Argument a, Argument b) { return primitive(op, {a, b}); }
  // `x` converted to `dtype` (x itself when it already has it).
  Value* convert(Value* x, DType dtype);
  // `x` with `sizes` (x itself when it already has them).
  Value* reshape(Value* x, const std::vector<int64_t>& sizes);
  Value* sum(Value* x, const std::vector<int64_t>& dims, bool keepdim);
  Value* amax(Value* x, const std::vector<int64_t>& dims, bool keepdim);
  // Zeros shaped like `like`, in `dtype`, from primitives alone: nothing compares greater
  // than infinity (NaN neither), so `like > inf` is all false.
  Value* zeros_like(Value* like, DType dtype);

 private:
  Graph* graph_;
  Node* position_;
};

}  // namespace dynvm::graph
