// AliasAnalysis: which values may share storage, and where each shared storage is
// written — what a pass must know before it merges or reorders tensor operations.
#pragma once

#include <cstddef>
#include <vector>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// Conservative by construction: values that may share storage get the same alias
// class. Graph inputs may alias one another (the caller can pass one tensor twice), so
// they share a class; a view or may-alias op joins its outputs to its first tensor
// argument; an in-place op joins its output to its first argument and writes it; an
// out variant joins its outputs to, and writes, its keyword tensors; any other
// mutating or opaque op writes all its tensor arguments (and an opaque op's outputs may
// alias all of them).
class AliasAnalysis {
 public:
  explicit AliasAnalysis(const Graph& graph);

  size_t alias_class(const Value* value) const;
  bool may_alias(const Value* a, const Value* b) const { return alias_class(a) == alias_class(b); }

  // Program position of a live node (0 for the first), as of construction.
  size_t position(const Node* node) const;
  // Whether a node strictly between the two positions writes storage of `alias_class`.
  bool written_between(size_t alias_class, size_t after, size_t before) const;
  // Whether a node after `position` writes storage of `alias_class`.
  bool written_after(size_t alias_class, size_t position) const;

  // Records that `a` and `b` may now alias (a pass replaced one by the other).
  void merge(const Value* a, const Value* b);

 private:
  size_t find(size_t id) const;
  void unite(size_t a, size_t b);

  mutable std::vector<size_t> parent_;       // union-find over value ids
  std::vector<std::vector<size_t>> writes_;  // by class root: sorted positions of writers
  std::vector<size_t> position_;             // by node id
};

}  // namespace dynvm::graph
