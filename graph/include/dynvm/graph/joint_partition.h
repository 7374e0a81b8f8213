// partition_joint_graph: a joint graph (autodiff.h) split into the forward graph, which
// also returns what the backward reads ("saved" values), and the backward graph. Cheap
// pointwise values are recomputed in the backward instead of saved when that saves no
// fewer bytes than it costs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dynvm/graph/autodiff.h"
#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// Where a backward input comes from: a forward input, or a forward output.
struct SavedValue {
  bool from_input = false;
  size_t index = 0;
};

// How the two halves of a split connect, and what the split saved.
struct SplitInfo {
  std::vector<SavedValue> saved;   // where each of the backward's first inputs comes from
  size_t num_forward_outputs = 0;  // the original graph's outputs
  std::vector<size_t> differentiable_outputs;  // as in JointGraph
  std::vector<size_t> grad_inputs;             // as in JointGraph
  // Bytes of the intermediates the forward keeps for the backward (its inputs and outputs
  // not counted),
  // and what they would be if nothing were recomputed.
  int64_t saved_bytes = 0;
  int64_t saved_bytes_without_recompute = 0;
  size_t recomputed_nodes = 0;  // forward nodes the backward runs again
};

struct ForwardBackward {
  // Inputs: the original graph's. Outputs: the original graph's, then the saved
  // intermediates that are not among them.
  Graph forward;
  // Inputs: one per entry of info.saved, then one tangent per differentiable output.
  // Outputs: one gradient per entry of info.grad_inputs.
  Graph backward;
  SplitInfo info;
};

// Fails when the backward would read a forward value that is not a tensor.
Expected<ForwardBackward> partition_joint_graph(const JointGraph& joint);

// derive_joint_graph, then partition_joint_graph.
Expected<ForwardBackward> derive_forward_backward(const Graph& forward);

// "# forward", the forward graph, "# backward", the backward graph, and a line saying
// where each backward input comes from and the bytes saved: the text the tests compare.
std::string to_text(const ForwardBackward& split);

}  // namespace dynvm::graph
