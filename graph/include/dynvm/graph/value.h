// Value: one SSA value of a graph (an input or a node output), with its static type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dynvm/graph/tensor_meta.h"

namespace dynvm::graph {

class Node;

// X(enumerator, name in the graph text). Tensors print as their metadata when it is
// known ("f32[2, 3] cpu") and as "Tensor" when it is not.
#define DYNVM_VALUE_KINDS(X) \
  X(Tensor, "Tensor")        \
  X(TensorList, "Tensor[]")  \
  X(Int, "int")              \
  X(Float, "float")          \
  X(Bool, "bool")

enum class ValueKind : uint8_t {
#define DYNVM_VALUE_KIND_ENUM(e, name) e,
  DYNVM_VALUE_KINDS(DYNVM_VALUE_KIND_ENUM)
#undef DYNVM_VALUE_KIND_ENUM
};

std::string_view value_kind_name(ValueKind kind);

// The static type of a value: its kind and, for tensors, the metadata once known.
struct ValueType {
  ValueKind kind = ValueKind::Tensor;
  std::optional<TensorMeta> meta;  // only for ValueKind::Tensor

  static ValueType tensor(TensorMeta meta) { return ValueType{ValueKind::Tensor, std::move(meta)}; }
  static ValueType of(ValueKind kind) { return ValueType{kind, std::nullopt}; }

  friend bool operator==(const ValueType& a, const ValueType& b) {
    return a.kind == b.kind && a.meta == b.meta;
  }
  friend bool operator!=(const ValueType& a, const ValueType& b) { return !(a == b); }
};

// Values are created and owned by their Graph and live as long as it does, so pointers
// to them stay valid even after the node defining them is removed.
class Value {
 public:
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  // Dense and deterministic: the order in which the graph created its values.
  size_t id() const { return id_; }
  const ValueType& type() const { return type_; }
  ValueKind kind() const { return type_.kind; }
  // The tensor metadata, or nullptr for non-tensors and tensors not yet inferred.
  const TensorMeta* meta() const { return type_.meta ? &*type_.meta : nullptr; }
  void set_type(ValueType type) { type_ = std::move(type); }

  // The name of a graph input ("x", "self_conv1_weight"); empty for node outputs.
  const std::string& name() const { return name_; }
  bool is_input() const { return producer_ == nullptr; }
  // The node defining this value (nullptr for graph inputs) and which output it is.
  Node* producer() const { return producer_; }
  size_t output_index() const { return output_index_; }
  // True when the defining node has been removed from the graph.
  bool is_removed() const;

  // One entry per use by a node's arguments (a node reading the value twice is listed
  // twice), in the order the uses were made.
  const std::vector<Node*>& users() const { return users_; }
  // How often the value appears in the graph's outputs.
  size_t num_output_uses() const { return output_uses_; }
  bool has_uses() const { return !users_.empty() || output_uses_ > 0; }

 private:
  friend class Graph;
  friend class Node;

  Value(size_t id, ValueType type, std::string name, Node* producer, size_t output_index)
      : id_(id),
        type_(std::move(type)),
        name_(std::move(name)),
        producer_(producer),
        output_index_(output_index) {}

  void add_user(Node* node) { users_.push_back(node); }
  void remove_user(Node* node);

  size_t id_;
  ValueType type_;
  std::string name_;
  Node* producer_;
  size_t output_index_;
  std::vector<Node*> users_;
  size_t output_uses_ = 0;
};

}  // namespace dynvm::graph
