// Functionalization: in-place operators and writes through views become out-of-place
// operators, so later passes see a graph without mutation.
#pragma once

#include <string_view>

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// The operator a program uses to write a final value back into a graph input.
inline constexpr std::string_view kWriteBackOp = "aten::copy_";

// Rewrites `aten::foo_(self, ...)` into `aten::foo(self', ...)` (converted back to self's
// dtype where promotion would change it; copy_, fill_, zero_ and random in-place ops
// have their own forms), and a write through a view into a scatter of the new value
// into its base (inverse reshape or permute, aten::slice_scatter, aten::select_scatter).
// batch_norm in training becomes batch_norm without running statistics plus their
// explicit update. Reads of a view after its base changed are replayed on the new base.
// Where the program mutated a graph input, the final value is written back at the end by
// one `aten::copy_(input, value)` per input, in input order; graph outputs that were the
// input or views of it read that copy's result, so the caller sees the same aliasing as
// in eager mode.
//
// Assumes distinct graph inputs do not share storage (codegen's CompiledGraph checks each
// call and runs the original graph op by op when a mutated input does). A graph
// with a mutation this pass cannot express (out variants, exponential_ and random_,
// writes through views without an inverse, opaque operators given tensors) is left
// unchanged; a graph without mutation is left unchanged too.
void functionalize(Graph& graph);

}  // namespace dynvm::graph
