// The autograd node of a graph with a compiled backward (graph_autograd_node.h).
#include "dynvm/runtime/graph_autograd_node.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "dynvm/codegen/compiled_graph.h"

namespace dynvm::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Named outside an anonymous namespace: its name is the node's in grad_fn.name().
struct CompiledGraphBackward : public torch::autograd::Function<CompiledGraphBackward> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs,
                               const c10::intrusive_ptr<GraphHolder>& holder) {
    const codegen::CompiledGraph& graph = *holder->graph;
    const graph::SplitInfo& split = graph.compiled_backward()->info;
    variable_list all = graph.run_saving_for_backward(inputs.vec());
    variable_list saved;
    for (const graph::SavedValue& s : split.saved) {
      saved.push_back(s.from_input ? inputs[s.index] : all[s.index]);
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["graph"] = c10::IValue::make_capsule(holder);
    ctx->saved_data["inputs"] = static_cast<int64_t>(inputs.size());
    variable_list outputs(all.begin(),
                          all.begin() + static_cast<std::ptrdiff_t>(split.num_forward_outputs));
    variable_list constant;
    for (size_t k = 0; k < outputs.size(); ++k) {
      bool differentiable =
          std::find(split.differentiable_outputs.begin(), split.differentiable_outputs.end(), k) !=
          split.differentiable_outputs.end();
      if (outputs[k].defined() && !differentiable) constant.push_back(outputs[k]);
    }
    if (!constant.empty()) ctx->mark_non_differentiable(constant);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_outputs) {
    const codegen::CompiledBackward& compiled =
        *graph_for_backward(ctx->saved_data["graph"]).compiled_backward();
    const graph::SplitInfo& split = compiled.info;
    variable_list args = ctx->get_saved_variables();
    for (size_t k : split.differentiable_outputs) {
      // The backward graph reads its gradients row-major; autograd materialises absent ones
      // as zeros.
      args.push_back(grad_outputs[k].contiguous());
    }
    variable_list found = compiled.backward->run(args);
    // One gradient per input, then none for the holder.
    variable_list grads(static_cast<size_t>(ctx->saved_data["inputs"].toInt()) + 1);
    for (size_t j = 0; j < split.grad_inputs.size(); ++j) grads[split.grad_inputs[j]] = found[j];
    return grads;
  }
};

std::vector<at::Tensor> run_with_compiled_backward(
    const std::shared_ptr<const codegen::CompiledGraph>& graph,
    const std::vector<at::Tensor>& inputs) {
  if (!call_records_autograd(inputs)) return graph->run(inputs);
  return CompiledGraphBackward::apply(at::TensorList(inputs),
                                      c10::make_intrusive<GraphHolder>(graph));
}

}  // namespace dynvm::runtime
