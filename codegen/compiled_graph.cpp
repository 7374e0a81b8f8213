// CompiledGraph: the backends behind a variant — ATen replay, or fused CPU kernels.
#include "dynvm/codegen/compiled_graph.h"

#include <ATen/core/Tensor.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "dynvm/codegen/aten_executor.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/graph/fusion_pipeline.h"

namespace dynvm::codegen {

struct CompiledGraph::Program {
  graph::FusionProgram fusion;
};

CompiledGraph::CompiledGraph() = default;
CompiledGraph::~CompiledGraph() = default;

const graph::Graph* CompiledGraph::outer_graph() const {
  return program_ ? &program_->fusion.outer : nullptr;
}

namespace {

// Why `graph` cannot run as fused kernels, or "".
std::string unfusable(const graph::Graph& graph) {
  for (const graph::Value* input : graph.inputs()) {
    const auto& meta = input->type().meta;
    if (meta && meta->requires_grad) {
      return "a graph input requires grad (kernels have no backward yet)";
    }
    if (meta && meta->device.type != graph::DeviceType::Cpu) {
      return "a graph input is not on the CPU";
    }
  }
  for (const graph::Node* node : graph.nodes()) {
    for (const graph::Value* out : node->outputs()) {
      const auto& meta = out->type().meta;
      if (meta && meta->requires_grad) return "the graph computes values that require grad";
    }
  }
  return "";
}

}  // namespace

Expected<std::unique_ptr<CompiledGraph>> CompiledGraph::build(const graph::Graph& graph,
                                                              const std::string& backend) {
  std::unique_ptr<CompiledGraph> compiled(new CompiledGraph());
  if (backend == "dynvm") {
    compiled->why_not_fused_ = graph.num_nodes() == 0 ? "" : unfusable(graph);
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
