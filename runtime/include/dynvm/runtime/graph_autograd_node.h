// The autograd node of a compiled graph that autograd records (CompiledGraph::
// records_autograd): one node per call, so that hooks, accumulation into .grad,
// retain_graph and torch.autograd.grad behave as in eager. Two kinds:
// - compiled_backward.cpp, for a graph with a compiled backward
//   (CompiledGraph::compiled_backward, graph/autodiff.h): the node's forward runs the fused
//   forward half and saves what the backward half reads; its backward runs the fused
//   backward half.
// - recomputed_backward.cpp, for the others: the forward runs the fused kernels and saves
//   the inputs; the backward runs the graph again as traced, op by op with autograd
//   recording, and differentiates it (the forward is computed twice when a gradient is
//   asked for).
// Double backward (create_graph=True) through either raises. The node keeps the compiled
// graph alive until it is freed, so a backward after dynvm.reset() (or the variant's
// eviction) still finds it.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/custom_class.h>

#include <memory>
#include <utility>
#include <vector>

namespace dynvm::codegen {
class CompiledGraph;
}

namespace dynvm::runtime {

// The outputs of `graph` on `inputs`, attached to one autograd node when grad mode is on
// and an input requires grad; otherwise graph.run(inputs). The graph must have a compiled
// backward (run_with_compiled_backward) or records_autograd() (the recomputing one).
std::vector<at::Tensor> run_with_compiled_backward(
    const std::shared_ptr<const codegen::CompiledGraph>& graph,
    const std::vector<at::Tensor>& inputs);
std::vector<at::Tensor> run_with_recomputed_backward(
    const std::shared_ptr<const codegen::CompiledGraph>& graph,
    const std::vector<at::Tensor>& inputs);

// --- shared by the two nodes

// The compiled graph, held by a node's saved data for its backward.
struct GraphHolder : public torch::CustomClassHolder {
  explicit GraphHolder(std::shared_ptr<const codegen::CompiledGraph> g) : graph(std::move(g)) {}
  std::shared_ptr<const codegen::CompiledGraph> graph;
};

// The graph a node's backward runs: refuses double backward (dynvm's error when grad mode
// is on), then unwraps the GraphHolder capsule kept in the node's saved data.
const codegen::CompiledGraph& graph_for_backward(const c10::IValue& holder);

// Whether a call records autograd: grad mode is on and an input requires grad.
bool call_records_autograd(const std::vector<at::Tensor>& inputs);

}  // namespace dynvm::runtime
