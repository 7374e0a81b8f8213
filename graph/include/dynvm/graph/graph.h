// Graph: an SSA graph of tensor operators — named inputs, nodes in program order, outputs.
#pragma once

#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/graph/argument.h"
#include "dynvm/graph/node.h"
#include "dynvm/graph/value.h"

namespace dynvm::graph {

// A size symbol of a graph with dynamic shapes: where its value comes from on each call
// (a guard source's text, "L['x'].size()[1]") and the value the trace saw.
struct GraphSymbol {
  std::string source;
  int64_t hint = 0;
  friend bool operator==(const GraphSymbol& a, const GraphSymbol& b) {
    return a.source == b.source && a.hint == b.hint;
  }
};

// Iterates the live nodes of a graph in program order. Removing the node being visited
// is allowed; inserting or removing others while iterating is not.
template <typename NodeT>
class NodeIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = NodeT*;
  using difference_type = std::ptrdiff_t;
  using pointer = NodeT**;
  using reference = NodeT*;

  explicit NodeIterator(NodeT* node) : node_(node) {}
  NodeT* operator*() const { return node_; }
  NodeIterator& operator++() {
    node_ = node_->next();
    return *this;
  }
  NodeIterator operator++(int) {
    NodeIterator before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(NodeIterator a, NodeIterator b) { return a.node_ == b.node_; }
  friend bool operator!=(NodeIterator a, NodeIterator b) { return a.node_ != b.node_; }

 private:
  NodeT* node_;
};

template <typename NodeT>
class NodeRange {
 public:
  explicit NodeRange(NodeT* first) : first_(first) {}
  NodeIterator<NodeT> begin() const { return NodeIterator<NodeT>(first_); }
  NodeIterator<NodeT> end() const { return NodeIterator<NodeT>(nullptr); }

 private:
  NodeT* first_;
};

// A graph owns its nodes and values. Misuse of this API (a value of another graph, a
// removed node as a position) is a compiler bug and fails a DYNVM_GRAPH_CHECK; what a
// pass can legitimately get wrong (a use before its definition, a use of a removed
// node's output) is left for verify() to report.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // A copy holding only the live nodes, with fresh dense ids.
  Graph clone() const;

  // --- inputs
  // `name` must be an identifier ([A-Za-z_][A-Za-z0-9_]*) not used by another input.
  Value* add_input(std::string name, ValueType type);
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* find_input(std::string_view name) const;  // nullptr when there is none

  // --- dynamic shapes: symbol s<i> is symbols()[i]; relations hold on every call the
  // graph serves (the trace's branches on sizes). A graph without symbols has fixed sizes.
  int32_t add_symbol(std::string source, int64_t hint);
  const std::vector<GraphSymbol>& symbols() const { return symbols_; }
  void add_relation(SymRelation relation);
  const std::vector<SymRelation>& relations() const { return relations_; }
  bool is_symbolic() const { return !symbols_.empty(); }
  // The symbols' hints, as SymExpr::evaluate takes them.
  std::vector<int64_t> symbol_hints() const;
  // Forgets the symbols and relations (specialize_shapes, once nothing refers to them).
  void clear_symbols();

  // --- nodes, in program order
  Node* append(std::string op, std::vector<Argument> args, std::vector<ValueType> output_types,
               std::vector<KeywordArgument> kwargs = {});
  Node* insert_before(Node* position, std::string op, std::vector<Argument> args,
                      std::vector<ValueType> output_types,
                      std::vector<KeywordArgument> kwargs = {});
  // Moves `node` just before `position` (nullptr: to the end).
  void move_before(Node* node, Node* position);
  // Unlinks `node` from program order. Its outputs stay allocated: uses of them that
  // remain are reported by verify(), never left dangling.
  void remove(Node* node);

  NodeRange<Node> nodes() { return NodeRange<Node>(first_); }
  NodeRange<const Node> nodes() const { return NodeRange<const Node>(first_); }
  size_t num_nodes() const { return num_live_nodes_; }
  Node* first_node() const { return first_; }
  Node* last_node() const { return last_; }

  // --- outputs
  void set_outputs(std::vector<Value*> outputs);
  const std::vector<Value*>& outputs() const { return outputs_; }

  // Makes every node argument and graph output that reads `from` read `to` instead.
  void replace_all_uses_with(Value* from, Value* to);
  // Makes `user`'s arguments that read `from` read `to` instead; other users keep `from`.
  void replace_uses_in(Node* user, Value* from, Value* to);

  // --- storage, indexed by id (removed nodes and their outputs included)
  size_t num_values() const { return values_.size(); }
  Value* value(size_t id) const;
  size_t num_node_ids() const { return node_storage_.size(); }
  Node* node(size_t id) const;
  bool owns(const Value* value) const;
  bool owns(const Node* node) const;

 private:
  Node* create_node(std::string op, std::vector<Argument> args, std::vector<ValueType> output_types,
                    std::vector<KeywordArgument> kwargs);
  void link_before(Node* node, Node* position);
  void unlink(Node* node);
  void check_arguments_owned(const std::string& op, const std::vector<Argument>& args,
                             const std::vector<KeywordArgument>& kwargs) const;

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> node_storage_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<GraphSymbol> symbols_;
  std::vector<SymRelation> relations_;
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  size_t num_live_nodes_ = 0;
};

// True for names a graph input may take: [A-Za-z_][A-Za-z0-9_]*.
bool is_valid_input_name(std::string_view name);

// Appends a copy of `node` to `out`, its arguments (nested lists included) reading values
// through `map`; returns the copy. The copy's outputs have the types of node's.
Node* copy_node(Graph& out, const Node& node, const std::function<Value*(const Value*)>& map);

}  // namespace dynvm::graph
