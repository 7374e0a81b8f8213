// Node: one operator application in a graph — an ATen-style operator name, its
// arguments (positional, then keyword) and its output values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/graph/argument.h"
#include "dynvm/graph/value.h"

namespace dynvm::graph {

// A keyword argument, printed `name=value` ("alpha=1").
struct KeywordArgument {
  std::string name;
  Argument value;

  friend bool operator==(const KeywordArgument& a, const KeywordArgument& b) {
    return a.name == b.name && a.value == b.value;
  }
  friend bool operator!=(const KeywordArgument& a, const KeywordArgument& b) { return !(a == b); }
};

// Nodes are created and owned by their Graph; a removed node stays allocated until the
// graph is destroyed, so dangling uses of its outputs can be reported, not dereferenced.
class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Dense and deterministic: the order in which the graph created its nodes.
  size_t id() const { return id_; }
  // The operator as ATen spells its schema: "aten::add.Tensor", "aten::convolution".
  const std::string& op() const { return op_; }

  const std::vector<Argument>& args() const { return args_; }
  const Argument& arg(size_t index) const;
  const std::vector<KeywordArgument>& kwargs() const { return kwargs_; }
  // The keyword argument called `name`, or nullptr.
  const Argument* kwarg(std::string_view name) const;
  // Replace an argument, keeping the use lists of the values involved up to date.
  void set_arg(size_t index, Argument value);
  // Replace the keyword argument `name`, or append it when the node has none of that name.
  void set_kwarg(std::string_view name, Argument value);

  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t index = 0) const;
  size_t num_outputs() const { return outputs_.size(); }

  // Calls fn(Value*) for every value the arguments read: positional, then keyword,
  // nested lists included, once per occurrence.
  template <typename Fn>
  void for_each_input(Fn&& fn) const {
    for (const Argument& a : args_) a.for_each_value(fn);
    for (const KeywordArgument& k : kwargs_) k.value.for_each_value(fn);
  }
  std::vector<Value*> input_values() const;

  bool is_removed() const { return removed_; }
  // Neighbours in program order; nullptr at either end. A removed node keeps the `next`
  // it had, so a loop may remove the node it is visiting.
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }

 private:
  friend class Graph;

  Node(size_t id, std::string op, std::vector<Argument> args, std::vector<KeywordArgument> kwargs)
      : id_(id), op_(std::move(op)), args_(std::move(args)), kwargs_(std::move(kwargs)) {}

  void add_uses();
  void drop_uses();
  void replace_input(Value* from, Value* to);

  size_t id_;
  std::string op_;
  std::vector<Argument> args_;
  std::vector<KeywordArgument> kwargs_;
  std::vector<Value*> outputs_;
  bool removed_ = false;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
};

}  // namespace dynvm::graph
