// The autograd node of a fused graph without a compiled backward: forward through the
// kernels, backward by recomputing the traced graph with autograd recording
// (graph_autograd_node.h); and what the two nodes share.
#include "dynvm/runtime/graph_autograd_node.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>

#include "dynvm/codegen/compiled_graph.h"

namespace dynvm::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const codegen::CompiledGraph& graph_for_backward(const c10::IValue& holder) {
  if (c10::GradMode::is_enabled()) {
    throw std::runtime_error(
        "dynvm: a compiled graph's backward is not differentiable: double backward "
        "(create_graph=True) through it is not supported yet; compile the function with "
        "backend=\"eager\", or call it outside dynvm, to differentiate twice");
  }
  return *c10::static_intrusive_pointer_cast<GraphHolder>(holder.toCapsule())->graph;
}

bool call_records_autograd(const std::vector<at::Tensor>& inputs) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const at::Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

// Named outside an anonymous namespace: its name is the node's in grad_fn.name().
struct RecomputedGraph : public torch::autograd::Function<RecomputedGraph> {
  // `inputs` as a TensorList: apply() counts each of its tensors as an input of the node.
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs,
                               const c10::intrusive_ptr<GraphHolder>& holder) {
    const codegen::CompiledGraph* compiled = holder->graph.get();
    ctx->saved_data["graph"] = c10::IValue::make_capsule(holder);
    ctx->save_for_backward(inputs.vec());
    ctx->set_materialize_grads(false);
    variable_list outputs = compiled->run(inputs.vec());
    const std::vector<bool>& requires_grad = compiled->output_requires_grad();
    variable_list constant;
    for (size_t k = 0; k < outputs.size(); ++k) {
      const at::Tensor& t = outputs[k];
      if (!t.defined()) continue;
      bool differentiable =
          (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) &&
          (k >= requires_grad.size() || requires_grad[k]);
      if (!differentiable) constant.push_back(t);
    }
    if (!constant.empty()) ctx->mark_non_differentiable(constant);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_outputs) {
    const codegen::CompiledGraph* compiled = &graph_for_backward(ctx->saved_data["graph"]);
    variable_list saved = ctx->get_saved_variables();
    variable_list leaves;
    std::vector<size_t> wanted;  // inputs that get a gradient
    for (size_t i = 0; i < saved.size(); ++i) {
      if (saved[i].defined() && saved[i].requires_grad()) {
        leaves.push_back(saved[i].detach().requires_grad_(true));
        wanted.push_back(i);
      } else {
        leaves.push_back(saved[i].defined() ? saved[i].detach() : saved[i]);
      }
    }
    variable_list outputs;
    {
      // The graph holds autocast's casts already: autocast must not add its own.
      c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
      at::AutoGradMode record(true);
      outputs = compiled->run_recording_autograd(leaves);
    }
    variable_list roots;
    variable_list seeds;
    for (size_t o = 0; o < outputs.size() && o < grad_outputs.size(); ++o) {
      if (grad_outputs[o].defined() && outputs[o].defined() && outputs[o].requires_grad()) {
        roots.push_back(outputs[o]);
        seeds.push_back(grad_outputs[o]);
      }
    }
    variable_list grads(saved.size() + 1);  // the last: the holder's, none
    if (roots.empty() || wanted.empty()) return grads;
    variable_list targets;
    for (size_t i : wanted) targets.push_back(leaves[i]);
    variable_list found = torch::autograd::grad(roots, targets, seeds, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < wanted.size(); ++k) grads[wanted[k]] = found[k];
    return grads;
  }
};

std::vector<at::Tensor> run_with_recomputed_backward(
    const std::shared_ptr<const codegen::CompiledGraph>& graph,
    const std::vector<at::Tensor>& inputs) {
  if (!call_records_autograd(inputs)) return graph->run(inputs);
  return RecomputedGraph::apply(at::TensorList(inputs), c10::make_intrusive<GraphHolder>(graph));
}

}  // namespace dynvm::runtime
