// CompiledGraph: the backends behind a variant — ATen replay, or fused CPU kernels.
#include "dynvm/codegen/compiled_graph.h"

#include <ATen/core/Tensor.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "dynvm/codegen/aten_executor.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/graph/fusion_pipeline.h"
#include "dynvm/graph/graph_dot.h"

namespace dynvm::codegen {

struct CompiledGraph::Program {
  graph::FusionProgram fusion;
};

CompiledGraph::CompiledGraph() = default;
CompiledGraph::~CompiledGraph() = default;

const graph::Graph* CompiledGraph::outer_graph() const {
  return program_ ? &program_->fusion.outer : nullptr;
}

std::string CompiledGraph::to_dot(const graph::Graph& graph, const std::string& name) const {
  if (!program_) {
    graph::DotOptions options;
    options.graph_name = name;
    options.is_extern = [](const graph::Node&) { return true; };  // every node is an ATen call
    return graph::to_dot(graph, options);
  }
  graph::DotOptions options = graph::fusion_dot_options(program_->fusion.fusion);
  options.graph_name = name;
  return graph::to_dot(program_->fusion.graph, options);
}

namespace {

// Why `graph` cannot run as fused kernels, or "".
std::string unfusable(const graph::Graph& graph, bool grad_enabled) {
  for (const graph::Value* input : graph.inputs()) {
    const auto& meta = input->type().meta;
    if (meta && meta->device.type != graph::DeviceType::Cpu) {
      return "a graph input is not on the CPU";
    }
  }
  // Inputs that require grad are fine under no_grad: what matters is whether autograd
  // would record a node the graph runs.
  bool mode = grad_enabled;
  for (const graph::Node* node : graph.nodes()) {
    if (node->op() == "dynvm::set_grad_enabled") {
      if (!node->args().empty() && node->args()[0].kind() == graph::Argument::Kind::Bool) {
        mode = node->args()[0].as_bool();
      }
      continue;
    }
    if (!mode) continue;
    for (const graph::Value* in : node->input_values()) {
      const auto& meta = in->type().meta;
      if (meta && meta->requires_grad) {
        return "the graph runs under autograd (kernels have no backward yet)";
      }
    }
  }
  return "";
}

}  // namespace

Expected<std::unique_ptr<CompiledGraph>> CompiledGraph::build(const graph::Graph& graph,
                                                              const std::string& backend,
                                                              bool grad_enabled) {
  std::unique_ptr<CompiledGraph> compiled(new CompiledGraph());
  if (backend == "dynvm") {
    compiled->why_not_fused_ = graph.num_nodes() == 0 ? "" : unfusable(graph, grad_enabled);
    if (graph.num_nodes() > 0 && compiled->why_not_fused_.empty()) {
      auto program = graph::lower_for_fusion(graph.clone());
      if (!program) {
        compiled->why_not_fused_ = "the graph passes failed: " + program.error().message;
      } else {
        compiled->program_ = std::make_unique<Program>(Program{std::move(program).value()});
      }
    }
  }
  if (!compiled->program_) {
    auto executor = AtenExecutor::build(graph);
    if (!executor) return executor.error();
    compiled->executor_ = std::move(executor).value();
    return compiled;
  }
  graph::FusionProgram& fusion = compiled->program_->fusion;
  compiled->group_count_ = fusion.groups.size();
  std::vector<AtenExecutor::GroupRunner> runners;
  for (size_t i = 0; i < fusion.groups.size(); ++i) {
    const graph::Graph& group = fusion.groups[i];
    auto kernel = CpuKernel::compile(group, {}, "fused_" + std::to_string(i));
    if (kernel) {
      std::shared_ptr<CpuKernel> k = std::move(kernel).value();
      compiled->kernels_.push_back(k);
      runners.push_back([k](const std::vector<at::Tensor>& in) { return k->run(in); });
      continue;
    }
    // This group runs its primitive ops through ATen.
    auto fallback = AtenExecutor::build(group);
    if (!fallback) return fallback.error();
    AtenExecutor* exec = fallback.value().get();
    compiled->fallback_groups_.push_back(std::move(fallback).value());
    runners.push_back([exec](const std::vector<at::Tensor>& in) { return exec->run(in); });
  }
  auto executor = AtenExecutor::build(fusion.outer, std::move(runners));
  if (!executor) return executor.error();
  compiled->executor_ = std::move(executor).value();
  return compiled;
}

std::vector<at::Tensor> CompiledGraph::run(const std::vector<at::Tensor>& inputs) const {
  return executor_->run(inputs);
}

}  // namespace dynvm::codegen
