// Node's argument access and the use-list bookkeeping its mutations need.
#include "dynvm/graph/node.h"

#include "dynvm/graph/check.h"

namespace dynvm::graph {

namespace {

void check_no_null_values(const Argument& a, const std::string& op) {
  a.for_each_value(
      [&](Value* v) { DYNVM_GRAPH_CHECK(v != nullptr, "null value in an argument of " + op); });
}

}  // namespace

const Argument& Node::arg(size_t index) const {
  DYNVM_GRAPH_CHECK(index < args_.size(), "argument index out of range for " + op_);
  return args_[index];
}

const Argument* Node::kwarg(std::string_view name) const {
  for (const KeywordArgument& k : kwargs_) {
    if (k.name == name) return &k.value;
  }
  return nullptr;
}

void Node::set_arg(size_t index, Argument value) {
  DYNVM_GRAPH_CHECK(index < args_.size(), "argument index out of range for " + op_);
  check_no_null_values(value, op_);
  if (!removed_) args_[index].for_each_value([&](Value* v) { v->remove_user(this); });
  args_[index] = std::move(value);
  if (!removed_) args_[index].for_each_value([&](Value* v) { v->add_user(this); });
}

void Node::set_kwarg(std::string_view name, Argument value) {
  check_no_null_values(value, op_);
  for (KeywordArgument& k : kwargs_) {
    if (k.name != name) continue;
    if (!removed_) k.value.for_each_value([&](Value* v) { v->remove_user(this); });
    k.value = std::move(value);
    if (!removed_) k.value.for_each_value([&](Value* v) { v->add_user(this); });
    return;
  }
  kwargs_.push_back(KeywordArgument{std::string(name), std::move(value)});
  if (!removed_) kwargs_.back().value.for_each_value([&](Value* v) { v->add_user(this); });
}

Value* Node::output(size_t index) const {
  DYNVM_GRAPH_CHECK(index < outputs_.size(), "output index out of range for " + op_);
  return outputs_[index];
}

std::vector<Value*> Node::input_values() const {
  std::vector<Value*> values;
  for_each_input([&](Value* v) { values.push_back(v); });
  return values;
}

void Node::add_uses() {
  for_each_input([&](Value* v) { v->add_user(this); });
}

void Node::drop_uses() {
  for_each_input([&](Value* v) { v->remove_user(this); });
}

void Node::replace_input(Value* from, Value* to) {
  size_t replaced = 0;
  for (Argument& a : args_) replaced += a.replace_value(from, to);
  for (KeywordArgument& k : kwargs_) replaced += k.value.replace_value(from, to);
  for (size_t i = 0; i < replaced; ++i) {
    from->remove_user(this);
    to->add_user(this);
  }
}

}  // namespace dynvm::graph
