// A graph under autograd with a compiled backward (CompiledGraph::compiled_backward): one
// autograd node per call, whose forward runs the fused forward half and saves what the
// backward half reads, and whose backward runs the fused backward half.
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

// The outputs of `graph` on `inputs`, attached to one autograd node when grad mode is on
// and an input requires grad; otherwise graph.run(inputs). The node's backward gives each
// input that requires grad its gradient (hooks, accumulation into .grad and retain_graph
// behave as for any node); double backward (create_graph=True) through it raises. The node
// keeps `graph` alive until it is freed.
std::vector<at::Tensor> run_with_compiled_backward(
    const std::shared_ptr<const codegen::CompiledGraph>& graph,
    const std::vector<at::Tensor>& inputs);

}  // namespace dynvm::runtime
