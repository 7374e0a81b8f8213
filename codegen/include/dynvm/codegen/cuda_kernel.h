// CudaKernel: one fused group compiled for a CUDA device through NVRTC and run on ATen
// tensors, launched with the driver API on ATen's current stream.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dynvm/codegen/fused_kernel.h"
#include "dynvm/codegen/kernel_disk_cache.h"
#include "dynvm/codegen/lower_loops_to_cuda.h"
#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace c10 {
class Stream;
}

namespace dynvm::codegen {

struct CudaCompileOptions {
  // The disk cache of CUBINs (kernel_disk_cache.h); "" uses no disk cache.
  std::string cache_dir = default_kernel_cache_dir();
  // mode="max-autotune": also compile the other schedules worth trying
  // (cuda_schedule_candidates), time them all on the first run's buffers and keep the
  // fastest; the choice is stored in the disk cache, so a later process compiles only it.
  bool autotune = false;
  // Group outputs written in place into group inputs (graph/in_place_outputs.h), as
  // (output, input) indices: their pointers may alias, so they are not __restrict__.
  std::vector<std::pair<size_t, size_t>> in_place;
};

// One schedule of a kernel, compiled and loaded.
struct CudaCompiledSchedule {
  CudaSchedule schedule;
  CudaKernelSource cuda;
  void* function = nullptr;         // CUfunction
  void* vector_function = nullptr;  // the vectorized variant, or nullptr
  bool cache_hit = false;           // found loaded or on disk: no NVRTC
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
  std::string source() const override { return schedule_.cuda.source; }
  bool cache_hit() const override { return cache_hit_; }
  const CudaLaunch& launch_shape() const { return schedule_.cuda.launch; }
  int device() const { return device_; }
  // Under autotuning: "tuned: 256 threads a block (timings)", "tuned before: ..." (the
  // disk cache), "one schedule: ..."; "" before the first run has timed the candidates, or
  // without autotuning.
  std::string tuning() const {
    std::lock_guard<std::mutex> lock(tuning_mutex_);
    return tuning_;
  }

 private:
  CudaKernel() = default;
  void launch(const CudaCompiledSchedule& schedule, std::vector<void*> pointers,
              const c10::Stream& stream) const;
  // Times every candidate on `pointers` (the first run's buffers) and keeps the fastest.
  void tune(const std::vector<void*>& pointers, const c10::Stream& stream) const;

  // Whether input `i` is a CPU scalar tensor the kernel takes by value.
  bool by_value(size_t i) const { return i < by_value_.size() && by_value_[i]; }

  LoopKernel kernel_;
  mutable CudaCompiledSchedule schedule_;  // the one launched (the tuned one, once chosen)
  int device_ = 0;
  // By input: a CPU scalar tensor (0-dim), passed by value as ATen passes CPU scalars to
  // its CUDA kernels (an optimizer's step count next to CUDA parameters).
  std::vector<bool> by_value_;
  bool cache_hit_ = false;
  // Autotuning: the schedules still to time (the first is the lowering's own), what was
  // decided, and where the decision is stored.
  mutable std::mutex tuning_mutex_;
  mutable std::atomic<bool> tuning_pending_{false};  // candidates_ not yet timed
  mutable std::vector<CudaCompiledSchedule> candidates_;
  mutable std::string tuning_;
  std::string tuning_key_;
  std::string cache_dir_;
};

// NVRTC compilations this process ran for CudaKernel (cache misses), for tests.
int64_t cuda_nvrtc_compilation_count();
// CUBINs this process loaded from the disk cache instead of compiling (the run report).
int64_t cuda_disk_load_count();

}  // namespace dynvm::codegen
