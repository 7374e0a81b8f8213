// CudaKernel: one fused group compiled for a CUDA device through NVRTC and run on ATen
// tensors, launched with the driver API on ATen's current stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dynvm/codegen/fused_kernel.h"
#include "dynvm/codegen/kernel_disk_cache.h"
#include "dynvm/codegen/lower_loops_to_cuda.h"
#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

struct CudaCompileOptions {
  // The disk cache of CUBINs (kernel_disk_cache.h); "" uses no disk cache.
  std::string cache_dir = default_kernel_cache_dir();
};

class CudaKernel final : public FusedKernel {
 public:
  // Lowers the group (lower_group, coalesce_loops, lower_loops_to_cuda), compiles it with
  // NVRTC for the architecture of CUDA device `device` (or takes the CUBIN from the disk
  // cache) and loads it. An unsupported group, or no usable driver or NVRTC, is an Error;
  // the caller then runs the group through ATen.
  static Expected<std::unique_ptr<CudaKernel>> compile(const graph::Graph& group, int device,
                                                       const std::string& name = "fused",
                                                       const CudaCompileOptions& options = {});

  const char* target() const override { return "cuda"; }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const override;
  void run_into(const std::vector<at::Tensor>& inputs,
                const std::vector<at::Tensor>& outputs) const override;
  bool fits(const at::Tensor& t, const graph::TensorMeta& meta) const override;
  const LoopKernel& loop_kernel() const override { return kernel_; }
  std::string source() const override { return cuda_.source; }
  bool cache_hit() const override { return cache_hit_; }
  const CudaLaunch& launch_shape() const { return cuda_.launch; }
  int device() const { return device_; }

 private:
  CudaKernel() = default;

  LoopKernel kernel_;
  CudaKernelSource cuda_;
  void* function_ = nullptr;         // CUfunction
  void* vector_function_ = nullptr;  // the vectorized variant, or nullptr
  int device_ = 0;
  bool cache_hit_ = false;
};

// NVRTC compilations this process ran for CudaKernel (cache misses), for tests.
int64_t cuda_nvrtc_compilation_count();

}  // namespace dynvm::codegen
