// CompiledGraph: the backends behind a variant — ATen replay, or fused CPU kernels.
#include "dynvm/codegen/compiled_graph.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "dynvm/codegen/aten_executor.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/codegen/cuda_kernel.h"
#include "dynvm/codegen/targets.h"
#include "dynvm/graph/functionalize.h"
#include "dynvm/graph/fusion_pipeline.h"
#include "dynvm/graph/graph_dot.h"
#include "dynvm/graph/in_place_outputs.h"
#include "dynvm/graph/memory_planning.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/pass_runner.h"
#include "dynvm/support/log_topics.h"
#include "dynvm/support/progress.h"
#include "executor/aten_layout.h"

namespace dynvm::codegen {

struct CompiledGraph::Program {
  graph::FusionProgram fusion;
  graph::MemoryPlan memory;  // over fusion.outer, as the executor applies it
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
  // Which target each group was compiled for, or that it runs through ATen.
  options.group_note = [this](int group) -> std::string {
    if (group < 0 || static_cast<size_t>(group) >= kernel_of_group_.size()) return "";
    const FusedKernel* kernel = kernel_of_group_[static_cast<size_t>(group)];
    return kernel != nullptr ? std::string(kernel->target()) + " kernel " + kernel->name()
                             : "runs through ATen";
  };
  return graph::to_dot(program_->fusion.graph, options);
}

namespace {

// Why `graph` cannot run as fused kernels, or "".
std::string unfusable(const graph::Graph& graph, bool grad_enabled) {
  std::optional<int64_t> cuda_device;
  for (const graph::Value* input : graph.inputs()) {
    const auto& meta = input->type().meta;
    if (!meta || meta->device.type == graph::DeviceType::Cpu) continue;
    if (meta->device.type != graph::DeviceType::Cuda)
      return "a graph input is on another device than the CPU or CUDA";
    if (cuda_device && *cuda_device != meta->device.index)
      return "the graph's inputs are on several CUDA devices";
    cuda_device = meta->device.index;
  }
  // Inputs that require grad are fine under no_grad: what matters is whether autograd
  // would record a node the graph runs.
  bool mode = grad_enabled;
  for (const graph::Node* node : graph.nodes()) {
    if (node->op() == graph::kSetGradEnabledOp) {
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

// How the outer graph's values get storage when it runs: kernels write their outputs
// wherever they are told (planned slots); a group running through ATen may return its
// inputs or views of them; extern calls allocate their own results.
graph::OutputStorage output_storage(const graph::Node& node,
                                    const std::vector<const FusedKernel*>& kernel_of_group) {
  if (node.op() != graph::kFusedOp) {
    graph::OutputStorage storage = graph::default_output_storage(node);
    return storage == graph::OutputStorage::Planned ? graph::OutputStorage::Fresh : storage;
  }
  const graph::Argument* group = node.kwarg("group");
  const FusedKernel* kernel = nullptr;
  if (group != nullptr && group->kind() == graph::Argument::Kind::Int && group->as_int() >= 0 &&
      static_cast<size_t>(group->as_int()) < kernel_of_group.size()) {
    kernel = kernel_of_group[static_cast<size_t>(group->as_int())];
  }
  if (kernel == nullptr) return graph::OutputStorage::AliasesAny;
  // The arena is host memory: device kernels get fresh outputs from their allocator.
  if (kernel->as_cpu() == nullptr) return graph::OutputStorage::Fresh;
  // run_into needs exactly the layout the kernel was compiled for.
  const std::vector<graph::TensorMeta>& metas = kernel->output_metas();
  bool same_layout = metas.size() == node.num_outputs();
  for (size_t i = 0; same_layout && i < metas.size(); ++i) {
    const graph::TensorMeta* meta = node.output(i)->meta();
    same_layout = meta != nullptr && meta->dtype == metas[i].dtype &&
                  meta->sizes == metas[i].sizes && meta->strides == metas[i].strides;
  }
  return same_layout ? graph::OutputStorage::Planned : graph::OutputStorage::Fresh;
}

// The device a group's kernel runs on: that of its tensors (inputs, or outputs when it has
// none), or nullopt when they are on several devices or one without a code generator.
std::optional<graph::Device> group_device(const graph::Graph& group) {
  std::optional<graph::Device> device;
  auto visit = [&](const graph::Value* v) {
    const graph::TensorMeta* meta = v->meta();
    if (meta == nullptr) return false;
    if (device && (device->type != meta->device.type || device->index != meta->device.index)) {
      return false;
    }
    device = meta->device;
    return true;
  };
  // CPU scalar inputs (0-dim) go along with tensors on a CUDA device, which take them by
  // value (CudaKernel), as ATen's CUDA kernels do.
  bool scalars_aside = false;
  for (const graph::Value* v : group.outputs()) {
    const graph::TensorMeta* meta = v->meta();
    scalars_aside =
        scalars_aside || (meta != nullptr && meta->device.type == graph::DeviceType::Cuda);
  }
  std::vector<int> by_value = scalars_aside ? cuda_value_buffers(group) : std::vector<int>{};
  for (size_t i = 0; i < group.inputs().size(); ++i) {
    if (std::find(by_value.begin(), by_value.end(), static_cast<int>(i)) != by_value.end()) {
      continue;
    }
    if (!visit(group.inputs()[i])) return std::nullopt;
  }
  for (const graph::Value* v : group.outputs()) {
    if (!visit(v)) return std::nullopt;
  }
  return device;
}

// Says once per process why CUDA groups run through ATen, when the CUDA target cannot
// compile them here.
void say_once_why_cuda_is_off(const std::string& why) {
  static std::once_flag said;
  std::call_once(said, [&] {
    std::cerr << "dynvm: CUDA graphs run through ATen (no fused CUDA kernels): " << why << "\n";
  });
}

// The group compiled for its device, or the reason it runs through ATen.
Expected<std::unique_ptr<FusedKernel>> compile_group(
    const graph::Graph& group, const std::string& name, bool autotune,
    const std::vector<std::pair<size_t, size_t>>& in_place = {}) {
  std::optional<graph::Device> device = group_device(group);
  if (!device) return make_error("the group's tensors are on several devices");
  if (device->type == graph::DeviceType::Cpu) {
    auto kernel = CpuKernel::compile(group, {}, name);
    if (!kernel) return kernel.error();
    return std::unique_ptr<FusedKernel>(std::move(kernel).value());
  }
  if (device->type == graph::DeviceType::Cuda) {
    static const TargetInfo cuda = [] {
      for (const TargetInfo& t : targets()) {
        if (t.name == "cuda") return t;
      }
      return TargetInfo{};
    }();
    if (!cuda.usable) {
      std::string why =
          !cuda.built ? "this build has no CUDA target (" + cuda.why_not + ")" : cuda.why_unusable;
      say_once_why_cuda_is_off(why);
      return make_error(why);
    }
    CudaCompileOptions options;
    options.autotune = autotune;
    options.in_place = in_place;
    auto kernel = CudaKernel::compile(group, static_cast<int>(std::max<int64_t>(0, device->index)),
                                      name, options);
    if (!kernel) return kernel.error();
    return std::unique_ptr<FusedKernel>(std::move(kernel).value());
  }
  return make_error("no code generator for the group's device");
}

using CompiledGroup = std::optional<Expected<std::unique_ptr<FusedKernel>>>;

// Compiles the CUDA groups of `groups` on up to 8 threads (NVRTC is most of a cold
// compile, and a ViT has dozens of groups); the others are left empty, for the caller to
// compile in order (the CPU target's JIT is not shared across threads).
std::vector<CompiledGroup> compile_cuda_groups(const std::vector<graph::Graph>& groups,
                                               const graph::Graph& outer, bool autotune) {
  std::vector<CompiledGroup> out(groups.size());
  // Per group: its outputs written in place into its inputs, (output, input).
  std::vector<std::vector<std::pair<size_t, size_t>>> in_place(groups.size());
  for (const graph::Node* node : outer.nodes()) {
    const graph::Argument* group = node->op() == graph::kFusedOp ? node->kwarg("group") : nullptr;
    if (group == nullptr || group->kind() != graph::Argument::Kind::Int || group->as_int() < 0 ||
        static_cast<size_t>(group->as_int()) >= groups.size()) {
      continue;
    }
    for (size_t k = 0; k < node->num_outputs(); ++k) {
      if (std::optional<size_t> into = graph::in_place_target(*node, k)) {
        in_place[static_cast<size_t>(group->as_int())].emplace_back(k, *into);
      }
    }
  }
  std::vector<size_t> cuda;
  for (size_t i = 0; i < groups.size(); ++i) {
    std::optional<graph::Device> device = group_device(groups[i]);
    if (device && device->type == graph::DeviceType::Cuda) cuda.push_back(i);
  }
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  auto work = [&] {
    for (size_t k = next++; k < cuda.size(); k = next++) {
      size_t i = cuda[k];
      try {
        out[i].emplace(
            compile_group(groups[i], "fused_" + std::to_string(i), autotune, in_place[i]));
      } catch (const std::exception& e) {
        out[i].emplace(make_error(std::string("compiling a CUDA kernel failed: ") + e.what()));
      }
      progress::kernels_compiled(++done, groups.size());
    }
  };
  size_t workers = std::min<size_t>(cuda.size(), 8);
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  if (workers > 0) work();
  for (std::thread& t : threads) t.join();
  return out;
}

// Why a graph that autograd records cannot be one autograd node, or "": it changes grad
// mode, or returns an input or a view of one.
std::string why_not_one_node(const graph::Graph& graph) {
  for (const graph::Node* node : graph.nodes()) {
    if (node->op() == graph::kSetGradEnabledOp) return "it changes grad mode";
  }
  for (const graph::Value* out : graph.outputs()) {
    const graph::Value* v = out;
    while (v->producer() != nullptr &&
           graph::op_properties(v->producer()->op()).may_alias_input() &&
           !v->producer()->input_values().empty()) {
      v = v->producer()->input_values()[0];
    }
    if (v->is_input() && v->kind() == graph::ValueKind::Tensor) {
      return "it returns an input or a view of one";
    }
  }
  return "";
}

// Why a graph that autograd records cannot have its backward recompute it, or "": besides
// why_not_one_node, it writes an input or a buffer (the recomputation would write again)
// or draws random numbers (the recomputation would draw others).
std::string why_not_recomputable(const graph::Graph& graph) {
  for (const graph::Node* node : graph.nodes()) {
    if (graph::node_may_write(*node)) return "it writes " + std::string(node->op()) + "'s input";
    if (graph::node_draws_random(*node)) return "it draws random numbers";
  }
  return why_not_one_node(graph);
}

// The graph's forward and backward halves (graph/joint_partition.h), from the graph after
// functionalization and decomposition.
Expected<graph::ForwardBackward> split_for_backward(const graph::Graph& graph) {
  std::string why = why_not_one_node(graph);
  if (!why.empty()) return make_error(why);
  for (const graph::Node* node : graph.nodes()) {
    // The passes drop detach (the value itself): differentiating after them would let
    // the gradient through. (Traces hold unused detaches where autograd saved a value.)
    const graph::Value* in = node->input_values().empty() ? nullptr : node->input_values()[0];
    if ((node->op() == "aten::detach" || node->op() == "aten::detach_") &&
        node->num_outputs() == 1 && node->output()->has_uses() && in->meta() != nullptr &&
        in->meta()->requires_grad) {
      return make_error("it detaches a tensor");
    }
  }
  graph::Graph g = graph.clone();
  auto passes = graph::run_passes(g, {"functionalize", "decompose", "cse", "dce"});
  if (!passes) return passes.error();
  return graph::derive_forward_backward(g);
}

}  // namespace

Expected<std::unique_ptr<CompiledGraph>> CompiledGraph::build(const graph::Graph& graph,
                                                              const std::string& backend,
                                                              bool grad_enabled, bool autotune) {
  return build_with(graph, backend, grad_enabled, autotune, /*joint_half=*/false);
}

Expected<std::unique_ptr<CompiledGraph>> CompiledGraph::build_with(const graph::Graph& graph,
                                                                   const std::string& backend,
                                                                   bool grad_enabled, bool autotune,
                                                                   bool joint_half) {
  std::unique_ptr<CompiledGraph> compiled(new CompiledGraph());
  if (backend == "dynvm") {
    compiled->why_not_fused_ = graph.num_nodes() == 0 ? "" : unfusable(graph, grad_enabled);
    if (!compiled->why_not_fused_.empty() && unfusable(graph, false).empty()) {
      // Only autograd stands in the way: a fused forward and a fused backward when every
      // operator has a derivative rule (graph/autodiff.h); else fused anyway when the
      // backward can recompute the graph (runtime/graph_autograd_node.h).
      auto started = std::chrono::steady_clock::now();
      auto split = split_for_backward(graph);
      auto split_done = std::chrono::steady_clock::now();
      auto forward = split ? build_with(split.value().forward, backend, false, autotune, true)
                           : Expected<std::unique_ptr<CompiledGraph>>(split.error());
      auto forward_done = std::chrono::steady_clock::now();
      auto backward = forward ? build_with(split.value().backward, backend, false, autotune, true)
                              : Expected<std::unique_ptr<CompiledGraph>>(forward.error());
      if (backward) {
        auto ms = [](auto from, auto to) {
          return std::chrono::duration<double, std::milli>(to - from).count();
        };
        auto pair = std::make_shared<CompiledBackward>();
        const graph::ForwardBackward& halves = split.value();
        pair->backward = std::move(backward).value();
        pair->info = halves.info;
        pair->forward_compile_ms = ms(split_done, forward_done);
        pair->backward_compile_ms =
            ms(started, split_done) + ms(forward_done, std::chrono::steady_clock::now());
        std::unique_ptr<CompiledGraph> result = std::move(forward).value();
        result->backward_ = std::move(pair);
        result->records_autograd_ = true;
        return result;
      }
      compiled->why_no_backward_ = backward.error().message;
      std::string why = why_not_recomputable(graph);
      if (why.empty()) {
        auto recorded = AtenExecutor::build(graph);
        if (!recorded) return recorded.error();
        compiled->recorded_ = std::move(recorded).value();
        compiled->records_autograd_ = true;
        for (const graph::Value* out : graph.outputs()) {
          compiled->output_requires_grad_.push_back(out->kind() == graph::ValueKind::Tensor &&
                                                    out->meta()->requires_grad);
        }
        compiled->why_not_fused_.clear();
      } else {
        compiled->why_not_fused_ += " and its backward cannot recompute it: " + why;
      }
    }
    if (graph.num_nodes() > 0 && compiled->why_not_fused_.empty()) {
      graph::FusionOptions fusion;
      fusion.channels_last = !joint_half;
      auto program = graph::lower_for_fusion(graph.clone(), {}, fusion);
      if (!program) {
        compiled->why_not_fused_ = "the graph passes failed: " + program.error().message;
      } else {
        compiled->program_ = std::make_unique<Program>(Program{std::move(program).value(), {}});
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
  std::vector<AtenExecutor::GroupIntoRunner> into_runners;
  std::vector<const FusedKernel*> kernel_of_group;
  std::vector<CompiledGroup> cuda_kernels =
      compile_cuda_groups(fusion.groups, fusion.outer, autotune);
  size_t compiled_so_far =
      static_cast<size_t>(std::count_if(cuda_kernels.begin(), cuda_kernels.end(),
                                        [](const CompiledGroup& k) { return k.has_value(); }));
  for (size_t i = 0; i < fusion.groups.size(); ++i) {
    const graph::Graph& group = fusion.groups[i];
    const bool compile_here = !cuda_kernels[i];
    auto kernel = cuda_kernels[i] ? std::move(*cuda_kernels[i])
                                  : compile_group(group, "fused_" + std::to_string(i), autotune);
    if (compile_here) progress::kernels_compiled(++compiled_so_far, fusion.groups.size());
    if (kernel) {
      std::shared_ptr<FusedKernel> k = std::move(kernel).value();
      compiled->kernels_.push_back(k);
      kernel_of_group.push_back(k.get());
      runners.push_back([k](const std::vector<at::Tensor>& in) { return k->run(in); });
      into_runners.push_back([k](const std::vector<at::Tensor>& in,
                                 const std::vector<at::Tensor>& out) { k->run_into(in, out); });
      continue;
    }
    // This group runs its primitive ops through ATen.
    if (log_topic_enabled("kernels")) {
      std::cerr << "[dynvm kernels] fused_" << i
                << " runs through ATen: " << (kernel ? "" : kernel.error().message) << "\n";
    }
    auto fallback = AtenExecutor::build(group);
    if (!fallback) return fallback.error();
    AtenExecutor* exec = fallback.value().get();
    compiled->fallback_groups_.push_back(std::move(fallback).value());
    kernel_of_group.push_back(nullptr);
    // Its results come in the layouts ATen picks; kernels downstream were compiled for
    // the recorded ones (which the passes may have chosen: graph/channels_last.h).
    std::vector<std::optional<graph::TensorMeta>> layouts;
    for (const graph::Value* out : group.outputs()) {
      layouts.push_back(out->meta() != nullptr ? std::optional<graph::TensorMeta>(*out->meta())
                                               : std::nullopt);
    }
    runners.push_back([exec, layouts](const std::vector<at::Tensor>& in) {
      std::vector<at::Tensor> out = exec->run(in);
      for (size_t o = 0; o < out.size() && o < layouts.size(); ++o) {
        if (layouts[o]) out[o] = in_layout(out[o], *layouts[o]);
      }
      return out;
    });
    into_runners.emplace_back();
  }
  compiled->kernel_of_group_ = kernel_of_group;
  // Inputs the program writes back into (functionalize.h): right only while they share no
  // memory with other inputs, which each call checks.
  std::vector<size_t> mutated;
  const std::vector<graph::Value*>& outer_inputs = fusion.outer.inputs();
  for (const graph::Node* node : fusion.outer.nodes()) {
    if (node->op() != graph::kWriteBackOp || node->input_values().empty()) continue;
    auto at = std::find(outer_inputs.begin(), outer_inputs.end(), node->input_values()[0]);
    if (at != outer_inputs.end()) mutated.push_back(static_cast<size_t>(at - outer_inputs.begin()));
  }
  if (!mutated.empty()) {
    auto op_by_op = AtenExecutor::build(graph);
    if (!op_by_op) return op_by_op.error();
    compiled->op_by_op_ = std::move(op_by_op).value();
    compiled->alias_fallback_ =
        std::make_unique<AliasFallback>(AliasFallback{mutated, compiled->op_by_op_.get()});
  }
  compiled->program_->memory = graph::plan_memory(
      fusion.outer, [&](const graph::Node& node) { return output_storage(node, kernel_of_group); });
  auto executor = AtenExecutor::build(fusion.outer, std::move(runners), std::move(into_runners),
                                      compiled->program_->memory);
  if (!executor) return executor.error();
  compiled->executor_ = std::move(executor).value();
  return compiled;
}

std::vector<size_t> CompiledGraph::written_inputs() const {
  return alias_fallback_ ? alias_fallback_->mutated_inputs : std::vector<size_t>{};
}

bool CompiledGraph::runs_op_by_op(const std::vector<at::Tensor>& inputs) const {
  return alias_fallback_ && inputs_overlap(inputs, alias_fallback_->mutated_inputs);
}

std::vector<at::Tensor> CompiledGraph::run_recording_autograd(
    const std::vector<at::Tensor>& inputs) const {
  return recorded_ ? recorded_->run(inputs) : run(inputs);
}

std::vector<at::Tensor> CompiledGraph::run_saving_for_backward(
    const std::vector<at::Tensor>& inputs) const {
  if (runs_op_by_op(inputs)) {
    return op_by_op_->run(inputs);
  }
  return executor_->run(inputs);
}

std::vector<at::Tensor> CompiledGraph::run(const std::vector<at::Tensor>& inputs) const {
  std::vector<at::Tensor> outputs = run_saving_for_backward(inputs);
  if (backward_) outputs.resize(backward_->info.num_forward_outputs);
  return outputs;
}

int CompiledGraph::lower_run_begin(GlueProgram& program, int64_t frame_slot,
                                   int64_t fail_code) const {
  return executor_->lower_run_begin(program, frame_slot, fail_code, alias_fallback_ != nullptr);
}

void CompiledGraph::lower_run_steps(GlueProgram& program, int frame, int64_t fail_code) const {
  executor_->lower_run_steps(program, frame, fail_code, kernel_of_group_, alias_fallback_.get());
}

const graph::MemoryPlan* CompiledGraph::memory_plan() const {
  return program_ ? &program_->memory : nullptr;
}

int64_t CompiledGraph::arena_bytes() const { return executor_->arena_bytes(); }
size_t CompiledGraph::planned_outputs() const { return executor_->planned_outputs(); }
size_t CompiledGraph::arena_allocations() const { return executor_->arena_allocations(); }

}  // namespace dynvm::codegen
