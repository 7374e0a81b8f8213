// CpuKernel: compiles a group through the loop IR and runs it on ATen tensors, splitting
// the parallel loop with at::parallel_for. The one CPU-target file that includes ATen.
#include "dynvm/codegen/cpu_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "dynvm/codegen/loop_pass_runner.h"
#include "dynvm/codegen/lower_group.h"
#include "executor/aten_dtype.h"
#include "executor/aten_layout.h"

namespace dynvm::codegen {

namespace {

// Elements of work one iteration of the parallel loop does, for the grain size.
constexpr int64_t kGrainElements = 32768;

}  // namespace

std::vector<std::string> CpuKernel::loop_passes() { return {"coalesce"}; }

Expected<std::unique_ptr<CpuKernel>> CpuKernel::compile(const graph::Graph& group,
                                                        const CpuCompileOptions& options,
                                                        const std::string& name) {
  auto start = std::chrono::steady_clock::now();
  Expected<LoopKernel> lowered = lower_group(group, name);
  if (!lowered) return lowered.error();
  std::unique_ptr<CpuKernel> kernel(new CpuKernel());
  kernel->kernel_ = std::move(*lowered);
  auto passes = run_loop_passes(kernel->kernel_, loop_passes());
  if (!passes) return passes.error();
  Expected<CpuCompiledKernel> compiled = compile_cpu_kernel(kernel->kernel_, options);
  if (!compiled) return compiled.error();
  kernel->compiled_ = std::move(*compiled);
  int64_t largest = 1;
  for (const graph::Value* v : group.inputs()) {
    kernel->inputs_.push_back(*v->meta());
    largest = std::max(largest, v->meta()->numel());
  }
  for (const graph::Value* v : group.outputs()) {
    kernel->outputs_.push_back(*v->meta());
    largest = std::max(largest, v->meta()->numel());
  }
  kernel->work_per_iteration_ =
      std::max<int64_t>(1, largest / std::max<int64_t>(1, kernel->kernel_.parallel_extent()));
  kernel->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return kernel;
}

std::vector<at::Tensor> CpuKernel::run(const std::vector<at::Tensor>& inputs) const {
  std::vector<at::Tensor> outputs;
  outputs.reserve(outputs_.size());
  for (const graph::TensorMeta& meta : outputs_) {
    outputs.push_back(at::empty_strided(meta.sizes, meta.strides,
                                        at::TensorOptions().dtype(to_scalar_type(meta.dtype))));
  }
  run_into(inputs, outputs);
  return outputs;
}

namespace {

// Checks `t` against `meta` (CpuKernel::fits), saying what differs when it does not.
void check_tensor(const at::Tensor& t, const graph::TensorMeta& meta, const std::string& kernel,
                  const char* what, size_t i) {
  if (CpuKernel::fits_cpu(t, meta)) return;
  TORCH_CHECK(t.defined() && t.device().is_cpu() && t.scalar_type() == to_scalar_type(meta.dtype) &&
                  t.sizes().vec() == meta.sizes,
              "kernel ", kernel, ": ", what, " ", i,
              " has another dtype, device or shape than the kernel was compiled for");
  for (size_t d = 0; d < meta.dim(); ++d) {
    TORCH_CHECK(meta.sizes[d] <= 1 || t.stride(static_cast<int64_t>(d)) == meta.strides[d],
                "kernel ", kernel, ": ", what, " ", i, " has other strides than compiled for");
  }
}

}  // namespace

bool CpuKernel::fits_cpu(const at::Tensor& t, const graph::TensorMeta& meta) {
  return t.defined() && t.device().is_cpu() && has_layout(t, meta);
}

void CpuKernel::run_into(const std::vector<at::Tensor>& inputs,
                         const std::vector<at::Tensor>& outputs) const {
  TORCH_CHECK(inputs.size() == inputs_.size(), "kernel ", kernel_.name, " takes ", inputs_.size(),
              " inputs, got ", inputs.size());
  TORCH_CHECK(outputs.size() == outputs_.size(), "kernel ", kernel_.name, " gives ",
              outputs_.size(), " outputs, got ", outputs.size(), " to fill");
  std::vector<void*> buffers;
  buffers.reserve(inputs_.size() + outputs_.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(inputs[i], inputs_[i], kernel_.name, "input", i);
    buffers.push_back(const_cast<void*>(inputs[i].data_ptr()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor(outputs[i], outputs_[i], kernel_.name, "output", i);
    buffers.push_back(outputs[i].data_ptr());
  }
  run_buffers(buffers.data());
}

bool CpuKernel::runs_in_one_call() const {
  for (const LoopBuffer& b : kernel_.buffers) {
    if (b.role == BufferRole::Temp) return false;
  }
  return kernel_.parallel_extent() <= std::max<int64_t>(1, kGrainElements / work_per_iteration_);
}

void CpuKernel::run_buffers(void* const* buffers) const {
  size_t count = inputs_.size() + outputs_.size();
  CpuKernelFunction function = compiled_.function;
  int64_t extent = kernel_.parallel_extent();
  int64_t grain = std::max<int64_t>(1, kGrainElements / work_per_iteration_);
  // Each chunk of the parallel loop gets its own temporaries (row scratch space).
  auto run_chunk = [&](int64_t begin, int64_t end) {
    std::vector<void*> args(buffers, buffers + count);
    std::vector<std::unique_ptr<char[]>> temps;
    for (const LoopBuffer& b : kernel_.buffers) {
      if (b.role != BufferRole::Temp) continue;
      size_t bytes = static_cast<size_t>(std::max<int64_t>(b.num_elements, 1)) *
                     static_cast<size_t>(std::max(graph::dtype_itemsize(b.dtype), 1));
      temps.emplace_back(new char[bytes]);
      args.push_back(temps.back().get());
    }
    function(args.data(), nullptr, begin, end);
  };
  if (extent <= grain) {
    run_chunk(0, extent);
  } else {
    at::parallel_for(0, extent, grain, run_chunk);
  }
}

}  // namespace dynvm::codegen
