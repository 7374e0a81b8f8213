// specialize_shapes: a graph with symbolic sizes (dynamic shapes) made concrete for one
// set of symbol values, the form every pass and backend after tracing works on.
//
// A graph traced with dynamic sizes is traced once; each call binds its symbols from the
// inputs' sizes (runtime), and the backend compiles the graph specialized to those values,
// once per distinct set (docs/dynamic_shapes.md).
#pragma once

#include <cstdint>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// A copy of `graph` with symbol s<i> replaced by values[i] everywhere: tensor sizes and
// strides, integer arguments; the copy has no symbols and no relations. An Error when
// `values` does not bind every symbol, a relation does not hold, or an expression cannot
// be evaluated (a division by zero) or gives a negative size.
Expected<Graph> specialize_shapes(const Graph& graph, const std::vector<int64_t>& values);

// `meta` at the given symbol values (a copy, unchanged when it has fixed sizes); nullopt
// where specialize_shapes would fail.
std::optional<TensorMeta> specialize_meta(const TensorMeta& meta,
                                          const std::vector<int64_t>& values);

}  // namespace dynvm::graph
