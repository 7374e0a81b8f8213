// CpuKernel: one fused group compiled for the CPU and callable on at::Tensors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/fused_kernel.h"
#include "dynvm/codegen/loop_ir.h"
#include "dynvm/graph/graph.h"
#include "dynvm/graph/tensor_meta.h"
#include "dynvm/support/expected.h"

namespace at {
class Tensor;
}  // namespace at

namespace dynvm::codegen {

class CpuKernel final : public FusedKernel {
 public:
  const char* target() const override { return "cpu"; }

  // Lowers the group (lower_group), coalesces its loops and compiles it (compile_cpu_kernel).
  // An unsupported group or a missing LLVM is an Error; the caller then runs the group
  // through ATen.
  // The loop passes (loop_pass_runner.h) run on a lowered group before code generation.
  static std::vector<std::string> loop_passes();

  static Expected<std::unique_ptr<CpuKernel>> compile(const graph::Graph& group,
                                                      const CpuCompileOptions& options = {},
                                                      const std::string& name = "fused");

  // Runs the kernel on `inputs` (one per group input, with the dtype, sizes and strides the
  // group was compiled for) and returns freshly allocated outputs laid out as the group's
  // outputs. The parallel loop is split across ATen's intra-op threads. A mismatching
  // input throws c10::Error, as an ATen kernel would.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const override;

  // The same into caller-provided outputs (for planned memory), which must have exactly
  // the dtype, sizes and strides of the group's outputs and must not overlap the inputs.
  void run_into(const std::vector<at::Tensor>& inputs,
                const std::vector<at::Tensor>& outputs) const override;

  // Whether `t` is laid out as `meta` says, as run_into requires of its tensors: dtype, CPU,
  // sizes, and the strides of dimensions longer than 1.
  static bool fits_cpu(const at::Tensor& t, const graph::TensorMeta& meta);
  bool fits(const at::Tensor& t, const graph::TensorMeta& meta) const override {
    return fits_cpu(t, meta);
  }
  // The same on data pointers (inputs, then outputs) that the caller checked: the parallel
  // loop split across threads, with temporaries per chunk.
  void run_buffers(void* const* buffers) const;
  // Whether the whole loop runs in one call of the compiled function with the inputs' and
  // outputs' data pointers only (no temporaries, too little work to split), so that a caller
  // may call compilation().function(buffers, nullptr, 0, parallel_extent()) itself.
  bool runs_in_one_call() const;
  int64_t parallel_extent() const { return kernel_.parallel_extent(); }

  const LoopKernel& loop_kernel() const override { return kernel_; }
  const CpuCompiledKernel& compilation() const { return compiled_; }
  bool cache_hit() const override { return compiled_.from_disk || compiled_.from_memory; }
  const CpuKernel* as_cpu() const override { return this; }

 private:
  CpuKernel() = default;

  LoopKernel kernel_;
  CpuCompiledKernel compiled_;
  int64_t work_per_iteration_ = 1;
};

}  // namespace dynvm::codegen
