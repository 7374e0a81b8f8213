// AtenExecutor: the "eager" backend — replays a graph node by node through ATen's dispatcher.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace at {
class Tensor;
}  // namespace at

namespace dynvm::codegen {

// The pseudo-operator `dynvm::set_grad_enabled(bool)`: no outputs; switches at::GradMode
// for the nodes after it.
inline constexpr std::string_view kSetGradEnabledOp = "dynvm::set_grad_enabled";

// Runs a captured graph on real tensors, calling every operator from the top of the
// dispatcher (autograd included), so results, in-place mutations of inputs, view aliasing
// and gradients are those of eager PyTorch. All name lookups and literal conversions
// happen once in build(); run() only fills a stack per node and calls the kernel.
class AtenExecutor {
 public:
  // Runs one fused group (`dynvm::fused(inputs..., group=N)` nodes): its input tensors in,
  // its output tensors out.
  using GroupRunner = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

  // Resolves every node's operator schema and converts its literal arguments according to
  // the schema. An unknown operator, a wrong argument count or a literal the schema cannot
  // take is an Error naming the node as the graph text prints it; the runtime then falls
  // back to plain eager execution. Graph inputs and outputs must be tensors.
  static Expected<std::unique_ptr<AtenExecutor>> build(const graph::Graph& graph);
  // The same for a graph with fused groups: group N runs `groups[N]`.
  static Expected<std::unique_ptr<AtenExecutor>> build(const graph::Graph& graph,
                                                       std::vector<GroupRunner> groups);

  ~AtenExecutor();
  AtenExecutor(const AtenExecutor&) = delete;
  AtenExecutor& operator=(const AtenExecutor&) = delete;

  // Executes the graph on `inputs` (one per graph input, in order) and returns the graph
  // outputs; an output that is a graph input is the caller's own at::Tensor. Intermediates
  // are released after their last use. The caller's grad mode is restored on return.
  // ATen's errors propagate as C++ exceptions (c10::Error), as does a wrong input count.
  // Safe to call from several threads at once.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  // Graph nodes, the grad-mode switches included.
  size_t num_steps() const;

  // The prepared steps, defined where they are built and run (aten_executor.cpp).
  struct Plan;

 private:
  explicit AtenExecutor(std::unique_ptr<const Plan> plan);

  std::unique_ptr<const Plan> plan_;
};

}  // namespace dynvm::codegen
