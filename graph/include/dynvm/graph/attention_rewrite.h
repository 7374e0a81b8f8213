// Attention written by hand, `softmax(q @ k.transpose(-2, -1) * scale [+ mask]) @ v`, as
// the trace records it (matmul's expand/clone/_unsafe_view around two bmm calls), becomes
// one aten::scaled_dot_product_attention node, which runs ATen's fused attention kernels
// (flash, memory-efficient) instead of materialising the scores.
#pragma once

#include "dynvm/graph/graph.h"

namespace dynvm::graph {

// Matches, for 4-d q [B, H, S, D], k [B, H, S2, D] and v [B, H, S2, Dv] of one floating
// dtype and device (or 3-d ones without H: torch.bmm, or @ with its no-op views):
//   scores = bmm(flat(q), flat(k.transpose(-2, -1)))   viewed as [B, H, S, S2]
//   scores * c | scores / c | scores                   (scale c, 1/c or 1.0)
//   masked_fill(., m, -inf) | . + a | .                (bool mask ~m, additive mask a)
//   _softmax(., -1) | softmax(., -1)
//   bmm(flat(.), flat(v))                              viewed as [B, H, S, Dv]
// where flat() is matmul's batch flattening (expand to the same sizes, an optional
// contiguous clone, a view to [B*H, ...]) and every intermediate has one use. The masks
// must broadcast to [B, H, S, S2]. The match is replaced by
// scaled_dot_product_attention(q, k, v, mask, 0.0, False, scale=c); dead nodes are left
// for dce (4-d matches are rewritten first and dce runs before 3-d ones, so the
// flattened bmm calls of a 4-d match are gone by then). Dropout between softmax and the
// second bmm (training) stops the match.
// Rows a mask removes entirely are NaN in the explicit form and may be 0 in ATen's
// kernels (docs/graph_ir.md).
void rewrite_attention(Graph& graph);

}  // namespace dynvm::graph
