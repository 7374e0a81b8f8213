// Reverse-mode differentiation of a graph: the joint graph of forward and backward, from
// one derivative rule per operator of the primitive set and per extern (matmul,
// convolution, pooling, embedding, losses), and its split into a forward graph that saves
// few tensors and a backward graph (joint_partition.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// A graph and its backward in one graph. Inputs: the forward graph's, then one tangent
// (the gradient of an output, "grad_<k>") per differentiable output. Outputs: the forward
// graph's, then one gradient per entry of `grad_inputs`. Nodes whose id is at least
// `first_backward_node` were made by differentiation.
struct JointGraph {
  Graph graph;
  size_t num_forward_inputs = 0;
  size_t num_forward_outputs = 0;
  std::vector<size_t> differentiable_outputs;  // forward output positions taking a tangent
  std::vector<size_t> grad_inputs;             // forward input positions given a gradient
  size_t first_backward_node = 0;
};

// Differentiates `forward` (after functionalize and decompose) with respect to its inputs
// whose metadata requires grad. A value needs a gradient when it is a floating tensor
// computed from such an input. Fails, naming the operator, when a value that needs a
// gradient comes from an operator without a derivative rule here, when a graph input
// that requires grad is written, or when nothing is differentiable.
Expected<JointGraph> derive_joint_graph(const Graph& forward);

// The operators with a derivative rule, for documentation and tests.
std::vector<std::string> differentiable_ops();

}  // namespace dynvm::graph
