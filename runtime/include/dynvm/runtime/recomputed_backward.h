// A fused graph under autograd (CompiledGraph::records_autograd): its forward runs the
// fused kernels and records one autograd node for the call; that node's backward runs the
// graph again as traced, op by op with autograd recording, from the inputs it saved, and
// differentiates it. Kernels have no backward of their own yet: this gives fused forwards
// to code that runs without torch.no_grad() (and asks for no gradient, or for one at the
// price of the forward computed twice) with eager's gradients.
#pragma once

#include <memory>
#include <vector>

namespace at {
class Tensor;
}
namespace dynvm::codegen {
class CompiledGraph;
}

namespace dynvm::runtime {

// The outputs of `graph` (records_autograd()) on `inputs`, attached to one autograd node
// when grad mode is on and an input requires grad; otherwise graph.run(inputs). Double
// backward (create_graph=True) through the node raises.
// The node keeps `graph` alive until it is freed, so a backward after dynvm.reset() (or
// the variant's eviction) still finds it.
std::vector<at::Tensor> run_with_recomputed_backward(
    const std::shared_ptr<const codegen::CompiledGraph>& graph,
    const std::vector<at::Tensor>& inputs);

}  // namespace dynvm::runtime
