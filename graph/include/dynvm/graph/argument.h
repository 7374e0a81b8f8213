// Argument: one input of a node — a Value, a literal constant, or a list of arguments.
//
// ATen schemas take tensors, scalars (int, float, bool), strings, dtypes, devices,
// memory formats, layouts, None, and lists of these (int[], float[], bool[3],
// Tensor[], Tensor?[]). One recursive type covers them all: a list may hold values,
// literals, None and further lists.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dynvm/graph/device.h"
#include "dynvm/graph/dtype.h"
#include "dynvm/graph/sym_expr.h"
#include "dynvm/graph/tensor_options.h"

namespace dynvm::graph {

class Value;

class Argument {
 public:
  // In the order of the alternatives of Storage below.
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    Double,
    String,
    DType,
    Device,
    MemoryFormat,
    Layout,
    Value,
    List,
    SymInt,  // an integer over the graph's symbols (dynamic shapes): `sym(2*s0)` in text
  };

  Argument() = default;  // None
  // Values are the most common argument; converting implicitly keeps graph-building code short.
  Argument(Value* value)  // NOLINT(google-explicit-constructor)
      : storage_(std::in_place_type<Value*>, value) {}

  static Argument none() { return Argument(); }
  static Argument boolean(bool v) { return make<bool>(v); }
  static Argument integer(int64_t v) { return make<int64_t>(v); }
  static Argument real(double v) { return make<double>(v); }
  static Argument string(std::string v) { return make<std::string>(std::move(v)); }
  static Argument dtype(DType v) { return make<DType>(v); }
  static Argument device(Device v) { return make<Device>(v); }
  static Argument memory_format(MemoryFormat v) { return make<MemoryFormat>(v); }
  static Argument layout(Layout v) { return make<Layout>(v); }
  static Argument value(Value* v) { return Argument(v); }
  static Argument list(std::vector<Argument> items) {
    return make<std::vector<Argument>>(std::move(items));
  }
  // A constant expression becomes a plain integer.
  static Argument sym_int(SymExpr v);
  static Argument int_list(const std::vector<int64_t>& items);
  static Argument double_list(const std::vector<double>& items);
  // A Tensor[] or Tensor?[] argument; nullptr entries become None.
  static Argument value_list(const std::vector<Value*>& items);

  Kind kind() const { return static_cast<Kind>(storage_.index()); }
  bool is_none() const { return kind() == Kind::None; }
  bool is_value() const { return kind() == Kind::Value; }
  bool is_list() const { return kind() == Kind::List; }

  // Accessors check the kind (DYNVM_GRAPH_CHECK).
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  DType as_dtype() const;
  Device as_device() const;
  MemoryFormat as_memory_format() const;
  Layout as_layout() const;
  Value* as_value() const;
  const std::vector<Argument>& as_list() const;
  const SymExpr& as_sym_int() const;

  // Calls fn(Value*) for every value in this argument, nested lists included, in order.
  template <typename Fn>
  void for_each_value(Fn&& fn) const {
    if (const auto* v = std::get_if<Value*>(&storage_)) {
      fn(*v);
    } else if (const auto* items = std::get_if<std::vector<Argument>>(&storage_)) {
      for (const Argument& item : *items) item.for_each_value(fn);
    }
  }
  bool contains_values() const;

  // Structural equality; values compare by identity, doubles by bit pattern (so -0.0
  // differs from 0.0 and a NaN equals the same NaN).
  friend bool operator==(const Argument& a, const Argument& b);
  friend bool operator!=(const Argument& a, const Argument& b) { return !(a == b); }

 private:
  friend class Node;

  using Storage = std::variant<std::monostate, bool, int64_t, double, std::string, DType, Device,
                               MemoryFormat, Layout, Value*, std::vector<Argument>, SymExpr>;
  static_assert(std::variant_size_v<Storage> == static_cast<size_t>(Kind::SymInt) + 1,
                "Kind lists the alternatives of Storage in order");

  template <typename T, typename V>
  static Argument make(V&& v) {
    Argument a;
    a.storage_.emplace<T>(std::forward<V>(v));
    return a;
  }

  // Replaces every occurrence of `from` by `to`; returns how many were replaced.
  size_t replace_value(Value* from, Value* to);

  Storage storage_;
};

}  // namespace dynvm::graph
