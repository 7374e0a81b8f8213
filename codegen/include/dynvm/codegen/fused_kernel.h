// FusedKernel: one fused group compiled for one target (the CPU through LLVM, CUDA through
// NVRTC), as everything that holds or calls a kernel sees it: what it takes and gives,
// whether a tensor fits it, and running it on the device's current stream.
#pragma once

#include <string>
#include <vector>

#include "dynvm/codegen/loop_ir.h"
#include "dynvm/graph/tensor_meta.h"

namespace at {
class Tensor;
}  // namespace at

namespace dynvm::codegen {

class CpuKernel;

class FusedKernel {
 public:
  virtual ~FusedKernel() = default;

  // "cpu" or "cuda" (targets.h names them the same way).
  virtual const char* target() const = 0;
  const std::string& name() const { return loop_kernel().name; }

  // Runs the kernel on `inputs` (one per group input, laid out as the group was compiled
  // for) and returns fresh outputs laid out as the group's outputs, allocated by the
  // device's allocator (ATen's caching allocator on CUDA). On CUDA the launch goes on
  // ATen's current stream of the inputs' device. A mismatching input throws c10::Error.
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const = 0;
  // The same into caller-provided outputs, which must fit output_metas() and not overlap
  // the inputs.
  virtual void run_into(const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs) const = 0;
  // Whether `t` is on this kernel's device and laid out as `meta` says: dtype, sizes, and
  // the strides of dimensions longer than 1.
  virtual bool fits(const at::Tensor& t, const graph::TensorMeta& meta) const = 0;

  // The dtype, sizes and strides run() takes and gives, as the group was compiled.
  const std::vector<graph::TensorMeta>& input_metas() const { return inputs_; }
  const std::vector<graph::TensorMeta>& output_metas() const { return outputs_; }
  // The loop nest the kernel was generated from.
  virtual const LoopKernel& loop_kernel() const = 0;
  // The generated source, for DYNVM_LOGS=kernels (CUDA C++; empty where the target
  // generates LLVM IR directly).
  virtual std::string source() const { return ""; }
  // Wall time of compiling: lowering, code generation (unless cached) and loading.
  double compile_milliseconds() const { return compile_ms_; }
  virtual bool cache_hit() const = 0;
  // The CPU kernel behind this one, for the glue that calls CPU code directly; nullptr
  // for other targets.
  virtual const CpuKernel* as_cpu() const { return nullptr; }

 protected:
  std::vector<graph::TensorMeta> inputs_;
  std::vector<graph::TensorMeta> outputs_;
  double compile_ms_ = 0;
};

}  // namespace dynvm::codegen
