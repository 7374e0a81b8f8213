// Graph construction, program-order editing, use replacement and cloning.
#include "dynvm/graph/graph.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "dynvm/graph/check.h"

namespace dynvm::graph {

bool is_valid_input_name(std::string_view name) {
  if (name.empty()) return false;
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!letter(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

namespace {

// `arg` with every value replaced by its image under `map` (indexed by value id).
Argument remap_argument(const Argument& arg, const std::vector<Value*>& map, const Graph& source) {
  if (arg.is_value()) {
    Value* v = arg.as_value();
    DYNVM_GRAPH_CHECK(source.owns(v) && map[v->id()] != nullptr,
                      "clone: an argument reads a value the graph does not define");
    return Argument(map[v->id()]);
  }
  if (arg.is_list()) {
    std::vector<Argument> items;
    for (const Argument& item : arg.as_list()) items.push_back(remap_argument(item, map, source));
    return Argument::list(std::move(items));
  }
  return arg;
}

}  // namespace

Graph::Graph() = default;
Graph::~Graph() = default;

Graph::Graph(Graph&& other) noexcept { *this = std::move(other); }

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  values_ = std::move(other.values_);
  node_storage_ = std::move(other.node_storage_);
  inputs_ = std::move(other.inputs_);
  outputs_ = std::move(other.outputs_);
  symbols_ = std::move(other.symbols_);
  relations_ = std::move(other.relations_);
  first_ = std::exchange(other.first_, nullptr);
  last_ = std::exchange(other.last_, nullptr);
  num_live_nodes_ = std::exchange(other.num_live_nodes_, 0);
  other.values_.clear();
  other.node_storage_.clear();
  other.inputs_.clear();
  other.outputs_.clear();
  other.symbols_.clear();
  other.relations_.clear();
  return *this;
}

Graph Graph::clone() const {
  Graph copy;
  copy.symbols_ = symbols_;
  copy.relations_ = relations_;
  // Old value id -> new value; nodes are created before their arguments are filled in,
  // so a graph whose order is (wrongly) not topological still copies faithfully.
  std::vector<Value*> map(values_.size(), nullptr);
  for (Value* input : inputs_) map[input->id()] = copy.add_input(input->name(), input->type());
  std::vector<std::pair<const Node*, Node*>> pairs;
  for (const Node* node : nodes()) {
    std::vector<ValueType> types;
    for (Value* out : node->outputs()) types.push_back(out->type());
    Node* fresh = copy.create_node(node->op(), {}, std::move(types), {});
    copy.link_before(fresh, nullptr);
    for (size_t i = 0; i < node->num_outputs(); ++i) {
      map[node->output(i)->id()] = fresh->output(i);
    }
    pairs.emplace_back(node, fresh);
  }
  for (auto& [old_node, fresh] : pairs) {
    for (const Argument& a : old_node->args())
      fresh->args_.push_back(remap_argument(a, map, *this));
    for (const KeywordArgument& k : old_node->kwargs()) {
      fresh->kwargs_.push_back(KeywordArgument{k.name, remap_argument(k.value, map, *this)});
    }
    fresh->add_uses();
  }
  std::vector<Value*> outputs;
  for (Value* v : outputs_) {
    DYNVM_GRAPH_CHECK(owns(v) && map[v->id()] != nullptr,
                      "clone: a graph output is not defined by the graph");
    outputs.push_back(map[v->id()]);
  }
  copy.set_outputs(std::move(outputs));
  return copy;
}

int32_t Graph::add_symbol(std::string source, int64_t hint) {
  symbols_.push_back(GraphSymbol{std::move(source), hint});
  return static_cast<int32_t>(symbols_.size() - 1);
}

void Graph::add_relation(SymRelation relation) { relations_.push_back(std::move(relation)); }

void Graph::clear_symbols() {
  symbols_.clear();
  relations_.clear();
}

std::vector<int64_t> Graph::symbol_hints() const {
  std::vector<int64_t> hints;
  hints.reserve(symbols_.size());
  for (const GraphSymbol& s : symbols_) hints.push_back(s.hint);
  return hints;
}

Value* Graph::add_input(std::string name, ValueType type) {
  DYNVM_GRAPH_CHECK(is_valid_input_name(name), "invalid graph input name '" + name + "'");
  DYNVM_GRAPH_CHECK(find_input(name) == nullptr, "duplicate graph input name '" + name + "'");
  values_.push_back(std::unique_ptr<Value>(
      new Value(values_.size(), std::move(type), std::move(name), nullptr, 0)));
  inputs_.push_back(values_.back().get());
  return inputs_.back();
}

Value* Graph::find_input(std::string_view name) const {
  for (Value* input : inputs_) {
    if (input->name() == name) return input;
  }
  return nullptr;
}

Node* Graph::create_node(std::string op, std::vector<Argument> args,
                         std::vector<ValueType> output_types, std::vector<KeywordArgument> kwargs) {
  node_storage_.push_back(std::unique_ptr<Node>(
      new Node(node_storage_.size(), std::move(op), std::move(args), std::move(kwargs))));
  Node* node = node_storage_.back().get();
  for (size_t i = 0; i < output_types.size(); ++i) {
    values_.push_back(
        std::unique_ptr<Value>(new Value(values_.size(), std::move(output_types[i]), "", node, i)));
    node->outputs_.push_back(values_.back().get());
  }
  return node;
}

void Graph::check_arguments_owned(const std::string& op, const std::vector<Argument>& args,
                                  const std::vector<KeywordArgument>& kwargs) const {
  auto check = [&](Value* v) {
    DYNVM_GRAPH_CHECK(v != nullptr, "null value in an argument of " + op);
    DYNVM_GRAPH_CHECK(owns(v), "an argument of " + op + " is a value of another graph");
  };
  for (const Argument& a : args) a.for_each_value(check);
  for (const KeywordArgument& k : kwargs) k.value.for_each_value(check);
}

Node* Graph::append(std::string op, std::vector<Argument> args, std::vector<ValueType> output_types,
                    std::vector<KeywordArgument> kwargs) {
  return insert_before(nullptr, std::move(op), std::move(args), std::move(output_types),
                       std::move(kwargs));
}

Node* Graph::insert_before(Node* position, std::string op, std::vector<Argument> args,
                           std::vector<ValueType> output_types,
                           std::vector<KeywordArgument> kwargs) {
  DYNVM_GRAPH_CHECK(position == nullptr || (owns(position) && !position->is_removed()),
                    "insert_before: the position is not a live node of this graph");
  check_arguments_owned(op, args, kwargs);
  Node* node =
      create_node(std::move(op), std::move(args), std::move(output_types), std::move(kwargs));
  node->add_uses();
  link_before(node, position);
  return node;
}

void Graph::link_before(Node* node, Node* position) {
  node->next_ = position;
  node->prev_ = position != nullptr ? position->prev_ : last_;
  if (node->prev_ != nullptr) {
    node->prev_->next_ = node;
  } else {
    first_ = node;
  }
  if (position != nullptr) {
    position->prev_ = node;
  } else {
    last_ = node;
  }
  ++num_live_nodes_;
}

void Graph::unlink(Node* node) {
  if (node->prev_ != nullptr) {
    node->prev_->next_ = node->next_;
  } else {
    first_ = node->next_;
  }
  if (node->next_ != nullptr) {
    node->next_->prev_ = node->prev_;
  } else {
    last_ = node->prev_;
  }
  --num_live_nodes_;
}

void Graph::move_before(Node* node, Node* position) {
  DYNVM_GRAPH_CHECK(owns(node) && !node->is_removed(),
                    "move_before: not a live node of this graph");
  DYNVM_GRAPH_CHECK(position == nullptr || (owns(position) && !position->is_removed()),
                    "move_before: the position is not a live node of this graph");
  if (node == position) return;
  unlink(node);
  link_before(node, position);
}

void Graph::remove(Node* node) {
  DYNVM_GRAPH_CHECK(owns(node) && !node->is_removed(), "remove: not a live node of this graph");
  // unlink() leaves node->next_ as it was, which lets a loop remove the node it visits.
  unlink(node);
  node->drop_uses();
  node->removed_ = true;
}

void Graph::set_outputs(std::vector<Value*> outputs) {
  for (Value* v : outputs) {
    DYNVM_GRAPH_CHECK(v != nullptr && owns(v), "a graph output is not a value of this graph");
  }
  for (Value* v : outputs_) --v->output_uses_;
  outputs_ = std::move(outputs);
  for (Value* v : outputs_) ++v->output_uses_;
}

void Graph::replace_all_uses_with(Value* from, Value* to) {
  DYNVM_GRAPH_CHECK(owns(from) && owns(to), "replace_all_uses_with: values of another graph");
  if (from == to) return;
  // Each distinct user once: replace_input rewrites every occurrence in that node.
  std::vector<Node*> users = from->users();
  std::sort(users.begin(), users.end(), [](Node* a, Node* b) { return a->id() < b->id(); });
  users.erase(std::unique(users.begin(), users.end()), users.end());
  for (Node* user : users) user->replace_input(from, to);
  for (Value*& v : outputs_) {
    if (v != from) continue;
    v = to;
    --from->output_uses_;
    ++to->output_uses_;
  }
}

void Graph::replace_uses_in(Node* user, Value* from, Value* to) {
  DYNVM_GRAPH_CHECK(owns(user) && owns(from) && owns(to), "replace_uses_in: another graph's");
  if (from != to) user->replace_input(from, to);
}

Value* Graph::value(size_t id) const {
  DYNVM_GRAPH_CHECK(id < values_.size(), "value id out of range");
  return values_[id].get();
}

Node* Graph::node(size_t id) const {
  DYNVM_GRAPH_CHECK(id < node_storage_.size(), "node id out of range");
  return node_storage_[id].get();
}

bool Graph::owns(const Value* value) const {
  return value != nullptr && value->id() < values_.size() && values_[value->id()].get() == value;
}

bool Graph::owns(const Node* node) const {
  return node != nullptr && node->id() < node_storage_.size() &&
         node_storage_[node->id()].get() == node;
}

namespace {

Argument remap(const Argument& a, const std::function<Value*(const Value*)>& map) {
  if (a.is_value()) return map(a.as_value());
  if (a.is_list()) {
    std::vector<Argument> items;
    for (const Argument& item : a.as_list()) items.push_back(remap(item, map));
    return Argument::list(std::move(items));
  }
  return a;
}

}  // namespace

// Appends a copy of `node` to `out`, reading values through `map`; returns the copy.
Node* copy_node(Graph& out, const Node& node, const std::function<Value*(const Value*)>& map) {
  std::vector<Argument> args;
  for (const Argument& a : node.args()) args.push_back(remap(a, map));
  std::vector<KeywordArgument> kwargs;
  for (const KeywordArgument& k : node.kwargs()) kwargs.push_back({k.name, remap(k.value, map)});
  std::vector<ValueType> types;
  for (const Value* v : node.outputs()) types.push_back(v->type());
  return out.append(node.op(), std::move(args), std::move(types), std::move(kwargs));
}

}  // namespace dynvm::graph
