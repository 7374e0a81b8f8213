// CudaKernel: NVRTC compilation with a disk cache of CUBINs, and launches on ATen's
// current CUDA stream with outputs and scratch space from ATen's caching allocator. No
// CUDA header: the stream comes through c10's device-generic interface, and the driver
// through cuda_libraries.h.
#include "dynvm/codegen/cuda_kernel.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "dynvm/codegen/cuda_libraries.h"
#include "dynvm/codegen/kernel_disk_cache.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_pass_runner.h"
#include "dynvm/codegen/lower_group.h"
#include "dynvm/support/log_topics.h"
#include "executor/aten_dtype.h"
#include "executor/aten_layout.h"

namespace dynvm::codegen {

namespace {

std::atomic<int64_t> nvrtc_compilations{0};

// Loaded functions by cache key and device: a kernel compiled twice in one process (the
// same group in two variants, a ResNet's repeated blocks) is compiled and loaded once.
// `compiling` holds the keys another thread is compiling now; `compiled` wakes the threads
// that wait for one of them.
std::mutex loaded_mutex;
std::condition_variable compiled;
std::set<std::pair<std::string, int>> compiling;
struct LoadedFunctions {
  void* scalar = nullptr;
  void* vector = nullptr;
};
std::map<std::pair<std::string, int>, LoadedFunctions>& loaded_functions() {
  static std::map<std::pair<std::string, int>, LoadedFunctions> functions;
  return functions;
}

}  // namespace

int64_t cuda_nvrtc_compilation_count() { return nvrtc_compilations.load(); }

Expected<std::unique_ptr<CudaKernel>> CudaKernel::compile(const graph::Graph& group, int device,
                                                          const std::string& name,
                                                          const CudaCompileOptions& options) {
  auto start = std::chrono::steady_clock::now();
  const CudaLibraries& libraries = cuda_libraries();
  if (!libraries.nvrtc) return make_error(libraries.why_not_nvrtc);
  auto info = cuda_device_info(device);
  if (!info) return info.error();
  Expected<LoopKernel> lowered = lower_group(group, name, cuda_lower_options());
  if (!lowered) return lowered.error();
  std::unique_ptr<CudaKernel> kernel(new CudaKernel());
  kernel->device_ = device;
  kernel->kernel_ = std::move(*lowered);
  auto passes = run_loop_passes(kernel->kernel_, cuda_loop_passes());
  if (!passes) return passes.error();
  // The function is named after its source, written once with a placeholder name: groups
  // that differ only in their name in the graph get one source, so one NVRTC compile.
  kernel->kernel_.name = "dv_kernel";
  auto unnamed = lower_loops_to_cuda(kernel->kernel_);
  if (!unnamed) return unnamed.error();
  kernel->kernel_.name = "dv_" + content_hash(unnamed->source).substr(0, 12);
  auto source = lower_loops_to_cuda(kernel->kernel_);
  if (!source) return source.error();
  kernel->cuda_ = std::move(*source);
  std::string architecture = info->architecture();
  std::string key = "cuda_" + content_hash(kernel->cuda_.source + "\n// " + architecture +
                                           " NVRTC " + std::to_string(libraries.nvrtc_major) + "." +
                                           std::to_string(libraries.nvrtc_minor));
  if (log_topic_enabled("kernels")) {
    std::string text = "[dynvm kernels] " + name + " = " + kernel->kernel_.name + " (" + key +
                       ", " + architecture + ", " + describe(kernel->cuda_.launch) +
                       ") loop IR:\n" + to_text(kernel->kernel_) + "[dynvm kernels] " + name +
                       " CUDA source:\n" + kernel->cuda_.source;
    std::cerr << text;
  }
  const std::pair<std::string, int> slot{key, device};
  {
    std::unique_lock<std::mutex> lock(loaded_mutex);
    compiled.wait(lock, [&] { return compiling.count(slot) == 0; });
    auto found = loaded_functions().find(slot);
    if (found != loaded_functions().end()) {
      kernel->function_ = found->second.scalar;
      kernel->vector_function_ = found->second.vector;
      kernel->cache_hit_ = true;
    } else {
      compiling.insert(slot);
    }
  }
  if (kernel->function_ == nullptr) {
    // Whatever happens below, the key is no longer being compiled; a failure leaves it
    // unloaded, and a waiting thread compiles it again (and fails alike).
    struct Done {
      const std::pair<std::string, int>& slot;
      ~Done() {
        {
          std::lock_guard<std::mutex> lock(loaded_mutex);
          compiling.erase(slot);
        }
        compiled.notify_all();
      }
    } done{slot};
    std::optional<std::string> image;
    if (!options.cache_dir.empty()) image = load_cached_object(options.cache_dir, key);
    kernel->cache_hit_ = image.has_value();
    if (!image) {
      ++nvrtc_compilations;
      auto cubin = nvrtc_compile_to_cubin(kernel->cuda_.source, name + ".cu", architecture);
      if (!cubin) return cubin.error();
      image = std::move(*cubin);
      if (!options.cache_dir.empty()) store_cached_object(options.cache_dir, key, *image);
    }
    auto function = cuda_load_function(device, *image, kernel->cuda_.name);
    if (!function) return function.error();
    kernel->function_ = *function;
    if (kernel->cuda_.launch.vector_lanes > 0) {
      auto vector = cuda_load_function(
          device, *image,
          kernel->cuda_.name + "_v" + std::to_string(kernel->cuda_.launch.vector_lanes));
      if (!vector) return vector.error();
      kernel->vector_function_ = *vector;
    }
    std::lock_guard<std::mutex> lock(loaded_mutex);
    loaded_functions()[slot] = {kernel->function_, kernel->vector_function_};
  }
  for (const graph::Value* v : group.inputs()) kernel->inputs_.push_back(*v->meta());
  for (const graph::Value* v : group.outputs()) kernel->outputs_.push_back(*v->meta());
  kernel->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return kernel;
}

bool CudaKernel::fits(const at::Tensor& t, const graph::TensorMeta& meta) const {
  return t.defined() && t.device().is_cuda() && t.device().index() == device_ &&
         has_layout(t, meta);
}

std::vector<at::Tensor> CudaKernel::run(const std::vector<at::Tensor>& inputs) const {
  std::vector<at::Tensor> outputs;
  outputs.reserve(outputs_.size());
  at::TensorOptions options = at::TensorOptions().device(at::Device(at::kCUDA, device_));
  for (const graph::TensorMeta& meta : outputs_) {
    outputs.push_back(
        at::empty_strided(meta.sizes, meta.strides, options.dtype(to_scalar_type(meta.dtype))));
  }
  run_into(inputs, outputs);
  return outputs;
}

void CudaKernel::run_into(const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs) const {
  TORCH_CHECK(inputs.size() == inputs_.size(), "kernel ", kernel_.name, " takes ", inputs_.size(),
              " inputs, got ", inputs.size());
  TORCH_CHECK(outputs.size() == outputs_.size(), "kernel ", kernel_.name, " gives ",
              outputs_.size(), " outputs, got ", outputs.size(), " to fill");
  std::vector<void*> pointers;
  pointers.reserve(kernel_.buffers.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(fits(inputs[i], inputs_[i]), "kernel ", kernel_.name, ": input ", i,
                " has another dtype, device, shape or layout than the kernel was compiled for");
    pointers.push_back(const_cast<void*>(inputs[i].data_ptr()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK(fits(outputs[i], outputs_[i]), "kernel ", kernel_.name, ": output ", i,
                " has another dtype, device, shape or layout than the kernel was compiled for");
    pointers.push_back(outputs[i].data_ptr());
  }
  at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
  c10::DeviceGuard guard(device);
  // Scratch space of the temporaries, from the caching allocator (freed after the launch
  // in stream order, as ATen's own kernels do).
  std::vector<at::Tensor> scratch;
  const CudaLaunch& launch = cuda_.launch;
  size_t t = 0;
  for (const LoopBuffer& b : kernel_.buffers) {
    if (b.role != BufferRole::Temp) continue;
    scratch.push_back(at::empty({launch.temp_elements[t++] * launch.scratch_slots()},
                                at::TensorOptions().device(device).dtype(to_scalar_type(b.dtype))));
    pointers.push_back(scratch.back().data_ptr());
  }
  std::vector<void*> args;
  args.reserve(pointers.size());
  for (void*& p : pointers) args.push_back(&p);
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(at::kCUDA);
  void* stream = impl->getStream(device).native_handle();
  // The vectorized variant when every buffer it accesses with vectors is aligned for them.
  bool vectorized = vector_function_ != nullptr;
  for (int b : launch.vector_buffers) {
    if (!vectorized) break;
    auto bytes = static_cast<uintptr_t>(
        graph::dtype_itemsize(kernel_.buffers[static_cast<size_t>(b)].dtype) * launch.vector_lanes);
    vectorized = reinterpret_cast<uintptr_t>(pointers[static_cast<size_t>(b)]) % bytes == 0;
  }
  std::string error =
      cuda_launch(device_, vectorized ? vector_function_ : function_, launch.grid(vectorized),
                  launch.block_threads, stream, args.data());
  TORCH_CHECK(error.empty(), "kernel ", kernel_.name, ": ", error);
}

}  // namespace dynvm::codegen
