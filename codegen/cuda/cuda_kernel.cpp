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
#include <cstdlib>
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
std::atomic<int64_t> disk_loads{0};

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
int64_t cuda_disk_load_count() { return disk_loads.load(); }

namespace {

// Lowers `kernel` with `schedule`, names its function after the source, and compiles it
// (or finds it loaded in this process, or its CUBIN on disk) and loads it.
Expected<CudaCompiledSchedule> build_schedule(LoopKernel& kernel, const CudaSchedule& schedule,
                                              const CudaBufferUse& use, int device,
                                              const std::string& architecture,
                                              const std::string& name,
                                              const CudaCompileOptions& options) {
  const CudaLibraries& libraries = cuda_libraries();
  CudaCompiledSchedule built;
  built.schedule = schedule;
  // The function is named after its source, written once with a placeholder name: groups
  // that differ only in their name in the graph get one source, so one NVRTC compile.
  kernel.name = "dv_kernel";
  auto unnamed = lower_loops_to_cuda(kernel, schedule, use);
  if (!unnamed) return unnamed.error();
  kernel.name = "dv_" + content_hash(unnamed->source).substr(0, 12);
  auto source = lower_loops_to_cuda(kernel, schedule, use);
  if (!source) return source.error();
  built.cuda = std::move(*source);
  std::string key = "cuda_" + content_hash(built.cuda.source + "\n// " + architecture + " NVRTC " +
                                           std::to_string(libraries.nvrtc_major) + "." +
                                           std::to_string(libraries.nvrtc_minor));
  if (log_topic_enabled("kernels")) {
    std::string text = "[dynvm kernels] " + name + " = " + kernel.name + " (" + key + ", " +
                       architecture + ", " + describe(built.cuda.launch) + ") loop IR:\n" +
                       to_text(kernel) + "[dynvm kernels] " + name + " CUDA source:\n" +
                       built.cuda.source;
    std::cerr << text;
  }
  const std::pair<std::string, int> slot{key, device};
  {
    std::unique_lock<std::mutex> lock(loaded_mutex);
    compiled.wait(lock, [&] { return compiling.count(slot) == 0; });
    auto found = loaded_functions().find(slot);
    if (found != loaded_functions().end()) {
      built.function = found->second.scalar;
      built.vector_function = found->second.vector;
      built.cache_hit = true;
      return built;
    }
    compiling.insert(slot);
  }
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
  built.cache_hit = image.has_value();
  if (built.cache_hit) ++disk_loads;
  if (!image) {
    ++nvrtc_compilations;
    auto cubin = nvrtc_compile_to_cubin(built.cuda.source, name + ".cu", architecture);
    if (!cubin) return cubin.error();
    image = std::move(*cubin);
    if (!options.cache_dir.empty()) store_cached_object(options.cache_dir, key, *image);
  }
  auto function = cuda_load_function(device, *image, built.cuda.name);
  if (!function) return function.error();
  built.function = *function;
  if (built.cuda.launch.vector_lanes > 0) {
    auto vector = cuda_load_function(
        device, *image, built.cuda.name + "_v" + std::to_string(built.cuda.launch.vector_lanes));
    if (!vector) return vector.error();
    built.vector_function = *vector;
  }
  std::lock_guard<std::mutex> lock(loaded_mutex);
  loaded_functions()[slot] = {built.function, built.vector_function};
  return built;
}

}  // namespace

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
  CudaBufferUse use;
  use.by_value = cuda_value_buffers(group);
  kernel->by_value_.assign(group.inputs().size(), false);
  for (int b : use.by_value) kernel->by_value_[static_cast<size_t>(b)] = true;
  // Buffer i is input i, then the outputs.
  for (const auto& [output, input] : options.in_place) {
    use.may_alias.push_back(static_cast<int>(input));
    use.may_alias.push_back(static_cast<int>(group.inputs().size() + output));
  }
  for (size_t i = 0; i < group.inputs().size(); ++i) {
    const graph::TensorMeta* meta = group.inputs()[i]->meta();
    if (meta != nullptr && meta->device.type == graph::DeviceType::Cpu && !kernel->by_value_[i]) {
      return make_error("a CPU tensor with dimensions among a CUDA group's inputs");
    }
  }
  std::string architecture = info->architecture();
  auto chosen = build_schedule(kernel->kernel_, {}, use, device, architecture, name, options);
  if (!chosen) return chosen.error();
  kernel->cache_hit_ = chosen->cache_hit;
  if (options.autotune) {
    // The choice is recorded on disk under the lowering's own source for this device's
    // architecture: a later process builds the chosen schedule only, and times nothing.
    kernel->tuning_key_ = "tune_" + content_hash(chosen->cuda.source + "\n// " + architecture +
                                                 " NVRTC " + std::to_string(libraries.nvrtc_major) +
                                                 "." + std::to_string(libraries.nvrtc_minor));
    kernel->cache_dir_ = options.cache_dir;
    std::optional<std::string> recorded =
        options.cache_dir.empty() ? std::nullopt
                                  : load_cached_object(options.cache_dir, kernel->tuning_key_);
    int threads = recorded ? std::atoi(recorded->c_str()) : 0;
    if (threads > 0 && threads != chosen->cuda.launch.block_threads) {
      auto again = build_schedule(kernel->kernel_, CudaSchedule{threads}, use, device, architecture,
                                  name, options);
      if (again) chosen = std::move(again);  // else keep the lowering's own schedule
    }
    if (recorded) {
      kernel->tuning_ = "tuned before: " + std::to_string(chosen->cuda.launch.block_threads) +
                        " threads a block (from the disk cache)";
      if (log_topic_enabled("kernels")) {
        std::cerr << "[dynvm kernels] " << chosen->cuda.name << ": " << kernel->tuning_ << "\n";
      }
    } else {
      kernel->candidates_.push_back(*chosen);
      for (const CudaSchedule& candidate : cuda_schedule_candidates(chosen->cuda.launch)) {
        auto other =
            build_schedule(kernel->kernel_, candidate, use, device, architecture, name, options);
        if (other) kernel->candidates_.push_back(std::move(*other));
      }
      if (kernel->candidates_.size() == 1) {
        kernel->candidates_.clear();
        kernel->tuning_ = "one schedule: " + std::to_string(chosen->cuda.launch.block_threads) +
                          " threads a block";
      }
    }
  }
  kernel->tuning_pending_.store(!kernel->candidates_.empty());
  kernel->schedule_ = std::move(*chosen);
  kernel->kernel_.name = kernel->schedule_.cuda.name;
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
    bool fit = by_value(i) ? inputs[i].defined() && inputs[i].device().is_cpu() &&
                                 has_layout(inputs[i], inputs_[i])
                           : fits(inputs[i], inputs_[i]);
    TORCH_CHECK(fit, "kernel ", kernel_.name, ": input ", i,
                " has another dtype, device, shape or layout than the kernel was compiled for");
    // By value: the launch copies the value from the host tensor's storage.
    pointers.push_back(const_cast<void*>(inputs[i].data_ptr()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK(fits(outputs[i], outputs_[i]), "kernel ", kernel_.name, ": output ", i,
                " has another dtype, device, shape or layout than the kernel was compiled for");
    pointers.push_back(outputs[i].data_ptr());
  }
  at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
  c10::DeviceGuard guard(device);
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(at::kCUDA);
  c10::Stream stream = impl->getStream(device);
  if (tuning_pending_.load(std::memory_order_acquire)) {  // no lock on a launch otherwise
    std::lock_guard<std::mutex> lock(tuning_mutex_);
    if (!candidates_.empty()) tune(pointers, stream);
  }
  launch(schedule_, pointers, stream);
}

void CudaKernel::launch(const CudaCompiledSchedule& schedule, std::vector<void*> pointers,
                        const c10::Stream& stream) const {
  at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
  // Scratch space of the temporaries, from the caching allocator (freed after the launch
  // in stream order, as ATen's own kernels do).
  std::vector<at::Tensor> scratch;
  const CudaLaunch& launch = schedule.cuda.launch;
  size_t t = 0;
  for (const LoopBuffer& b : kernel_.buffers) {
    if (b.role != BufferRole::Temp) continue;
    int64_t per_slot = launch.temp_elements[t++];
    if (per_slot == 0) {  // kept in registers: the kernel never addresses it
      pointers.push_back(nullptr);
      continue;
    }
    scratch.push_back(at::empty({per_slot * launch.scratch_slots()},
                                at::TensorOptions().device(device).dtype(to_scalar_type(b.dtype))));
    pointers.push_back(scratch.back().data_ptr());
  }
  if (launch.split_parts > 0) {
    // Split rows or columns: one partial per part (and reduction), and per row or block of
    // columns a count of the parts done, from zero.
    scratch.push_back(
        at::empty({launch.split_partial_count()},
                  at::TensorOptions().device(device).dtype(to_scalar_type(launch.split_type))));
    pointers.push_back(scratch.back().data_ptr());
    scratch.push_back(at::zeros({launch.split_counter_count()},
                                at::TensorOptions().device(device).dtype(at::kInt)));
    pointers.push_back(scratch.back().data_ptr());
  }
  std::vector<void*> args;
  args.reserve(pointers.size());
  for (size_t i = 0; i < pointers.size(); ++i) {
    // A pointer parameter's argument is where the pointer is; a value's, the value itself.
    args.push_back(by_value(i) ? pointers[i] : static_cast<void*>(&pointers[i]));
  }
  // Last, the iterations: the source leaves them to run time (lower_loops_to_cuda.h).
  long long iterations = launch.iterations;
  args.push_back(&iterations);
  // The vectorized variant when every buffer it accesses with vectors is aligned for them.
  bool vectorized = schedule.vector_function != nullptr;
  for (int b : launch.vector_buffers) {
    if (!vectorized) break;
    auto bytes = static_cast<uintptr_t>(
        graph::dtype_itemsize(kernel_.buffers[static_cast<size_t>(b)].dtype) * launch.vector_lanes);
    vectorized = reinterpret_cast<uintptr_t>(pointers[static_cast<size_t>(b)]) % bytes == 0;
  }
  std::string error = cuda_launch(
      device_, vectorized ? schedule.vector_function : schedule.function, launch.grid(vectorized),
      launch.block_threads, stream.native_handle(), args.data());
  TORCH_CHECK(error.empty(), "kernel ", kernel_.name, ": ", error);
}

void CudaKernel::tune(const std::vector<void*>& pointers, const c10::Stream& stream) const {
  // Each schedule on this call's buffers: one launch to warm up, then kTimed launches
  // between two events. A kernel writes only its outputs, so the runs change nothing
  // else, and the chosen schedule's launch that follows overwrites them. Another schedule
  // must beat the lowering's own by 3% to be chosen.
  constexpr int kTimed = 10;
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(at::kCUDA);
  auto index = static_cast<c10::DeviceIndex>(device_);
  double best_ms = 0;
  size_t best = 0;
  std::string timings;
  for (size_t c = 0; c < candidates_.size(); ++c) {
    launch(candidates_[c], pointers, stream);
    void* begin = nullptr;
    void* end = nullptr;
    impl->record(&begin, stream, index, c10::EventFlag::BACKEND_DEFAULT);
    for (int i = 0; i < kTimed; ++i) launch(candidates_[c], pointers, stream);
    impl->record(&end, stream, index, c10::EventFlag::BACKEND_DEFAULT);
    impl->synchronizeEvent(end);
    double ms = impl->elapsedTime(begin, end, index) / kTimed;
    impl->destroyEvent(begin, index);
    impl->destroyEvent(end, index);
    timings += (c == 0 ? "" : ", ") + std::to_string(candidates_[c].cuda.launch.block_threads) +
               " threads " + std::to_string(ms * 1000.0).substr(0, 6) + " us";
    if (c == 0 || ms < best_ms * 0.97) {
      best_ms = ms;
      best = c;
    }
  }
  schedule_ = candidates_[best];
  candidates_.clear();
  tuning_pending_.store(false, std::memory_order_release);
  tuning_ = "tuned: " + std::to_string(schedule_.cuda.launch.block_threads) + " threads a block (" +
            timings + ")";
  if (!cache_dir_.empty()) {
    store_cached_object(cache_dir_, tuning_key_,
                        std::to_string(schedule_.cuda.launch.block_threads));
  }
  if (log_topic_enabled("kernels")) {
    std::cerr << "[dynvm kernels] " << schedule_.cuda.name << ": " << tuning_ << "\n";
  }
}

}  // namespace dynvm::codegen
