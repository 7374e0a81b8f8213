// Decomposition: composite operators rewritten into the primitive set (primitive_ops.h)
// plus extern matrix products.
#pragma once

#include <string_view>
#include <vector>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// Replaces every node with a decomposition (gelu, silu, layer_norm, eval batch_norm,
// softmax, mean, var, addmm, linear, identity-like clones, ...; docs/graph_passes.md
// lists them) by primitive nodes whose every value carries metadata. Half-precision math
// runs in float32 and is converted back, as ATen's kernels do. A node whose arguments
// fall outside what its decomposition handles (batch_norm in training, an output the
// primitives cannot produce, a clone returned to the caller) is left unchanged.
void decompose(Graph& graph);

// The operators decompose() rewrites, in the order of its table.
std::vector<std::string_view> decomposed_ops();

}  // namespace dynvm::graph
