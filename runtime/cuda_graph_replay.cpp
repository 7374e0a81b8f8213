// CudaGraphReplay: recording a variant's run as a CUDA graph and replaying it. The
// recording itself goes through torch.cuda.CUDAGraph (dynvm/_cuda_graphs.py), which owns
// the private memory pool; this file decides what is recorded and moves tensors in and out.
#include "dynvm/runtime/cuda_graph_replay.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <utility>

#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/codegen/cuda_libraries.h"
#include "dynvm/graph/graph.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/runtime/compiled_function.h"
#include "dynvm/runtime/run_report.h"

namespace dynvm::runtime {

namespace {

const c10::StorageImpl* storage_of(const at::Tensor& t) {
  return t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
}

// dynvm._cuda_graphs.<name>, kept for the process.
PyObject* helper(const char* name) {
  PyRef module = PyRef::steal(PyImport_ImportModule("dynvm._cuda_graphs"));
  if (!module) return nullptr;
  return PyObject_GetAttrString(module.get(), name);
}

// The pending Python error as text (cleared), for an exception's message.
std::string take_python_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyRef text = PyRef::steal(value != nullptr ? PyObject_Str(value) : nullptr);
  std::string out = text ? PyUnicode_AsUTF8(text.get()) : "unknown Python error";
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return out;
}

// ATen's current stream on CUDA device `device` (a cudaStream_t).
void* current_stream(int device) {
  static const c10::impl::DeviceGuardImplInterface* cuda =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return cuda->getStream({c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)})
      .native_handle();
}

// Copies `source` into `destination` on the current stream. Tensors of one layout, dense
// without overlap, are one span of bytes each: one driver call copies them, a few
// microseconds of host time less than ATen's copy_ (the copies around a replay are most
// of its host time). Other layouts go through copy_.
void copy_tensor(const at::Tensor& destination, const at::Tensor& source) {
  if (destination.is_non_overlapping_and_dense() && source.is_non_overlapping_and_dense() &&
      destination.dtype() == source.dtype() && destination.sizes() == source.sizes() &&
      destination.strides() == source.strides() && destination.device() == source.device()) {
    int device = source.device().index();
    std::string error = codegen::cuda_copy_async(device, destination.data_ptr(), source.data_ptr(),
                                                 source.nbytes(), current_stream(device));
    if (error.empty()) return;
    throw std::runtime_error("dynvm: copying around a CUDA graph replay: " + error);
  }
  destination.copy_(source, /*non_blocking=*/true);
}

}  // namespace

std::string CudaGraphReplay::why_not(const graph::Graph& graph,
                                     const codegen::CompiledGraph& compiled) {
  if (!compiled.runs_fused()) {
    return "the graph runs op by op" + (compiled.why_not_fused().empty()
                                            ? std::string()
                                            : " (" + compiled.why_not_fused() + ")");
  }
  std::optional<graph::Device> device;
  auto on_one_gpu = [&](const graph::Value* v) {
    const graph::TensorMeta* meta = v->meta();
    if (meta == nullptr) return true;  // not a tensor
    if (meta->device.type != graph::DeviceType::Cuda) return false;
    if (device && device->index != meta->device.index) return false;
    device = meta->device;
    return true;
  };
  bool ok = true;
  for (const graph::Value* v : graph.inputs()) ok = ok && on_one_gpu(v);
  for (const graph::Node* node : graph.nodes()) {
    for (const graph::Value* v : node->outputs()) ok = ok && on_one_gpu(v);
  }
  if (!ok) return "its tensors are not all on one CUDA device";
  if (!device) return "it has no CUDA tensor";
  return "";
}

CudaGraphReplay::CudaGraphReplay(const codegen::CompiledGraph* graph, const graph::Graph& captured,
                                 std::vector<bool> in_place, std::string where)
    : graph_(graph),
      in_place_(std::move(in_place)),
      reads_in_place_(in_place_),
      always_copy_(in_place_.size(), false),
      warm_up_addresses_(in_place_.size(), nullptr),
      warm_up_tensors_(in_place_.size(), nullptr),
      written_(graph->written_inputs()),
      where_(std::move(where)) {
  for (const graph::Node* node : captured.nodes()) {
    draws_random_ = draws_random_ || graph::node_draws_random(*node);
  }
}

CudaGraphReplay::~CudaGraphReplay() {
  // Outputs and static buffers go before the graph that owns their pool.
  outputs_.clear();
  statics_.clear();
}

std::string CudaGraphReplay::note() const {
  switch (state_) {
    case State::Replaying:
      return "replays as a CUDA graph";
    case State::WarmingUp:
      return "records a CUDA graph after " + std::to_string(warmups_left_) + " more call" +
             (warmups_left_ == 1 ? "" : "s");
    case State::Off:
      break;
  }
  return "not a CUDA graph: " + why_off_;
}

void CudaGraphReplay::turn_off(std::string why) {
  state_ = State::Off;
  why_off_ = std::move(why);
  outputs_.clear();
  statics_.clear();
  replay_method_ = PyRef();
  graph_exec_ = nullptr;
  cuda_graph_ = PyRef();
  run_report().cuda_graphs.push_back({where_, note()});
  if (log_enabled("cudagraphs"))
    std::fprintf(stderr, "dynvm: %s: %s\n", where_.c_str(), note().c_str());
}

std::vector<at::Tensor> CudaGraphReplay::run(const std::vector<at::Tensor>& inputs) {
  if (state_ == State::WarmingUp && warmups_left_ > 0) {
    --warmups_left_;
    for (size_t i = 0; i < inputs.size() && i < warm_up_addresses_.size(); ++i) {
      warm_up_addresses_[i] = inputs[i].defined() ? inputs[i].data_ptr() : nullptr;
      warm_up_tensors_[i] = inputs[i].unsafeGetTensorImpl();
    }
    return graph_->run(inputs);
  }
  if (state_ == State::Off || graph_->runs_op_by_op(inputs)) return graph_->run(inputs);
  // First, so that an earlier result passed back in as an argument is seen at its new
  // address.
  release_held_outputs();
  if (state_ == State::WarmingUp) {
    if (!record(inputs)) return graph_->run(inputs);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!reads_in_place_[i] || inputs[i].data_ptr() == recorded_addresses_[i]) continue;
    if (!in_place_[i]) {
      // An argument read where it lay has moved: copy it from now on.
      always_copy_[i] = true;
    } else if (recordings_ >= kMaxRecordings) {
      // A parameter moved (its .data replaced): the recording reads the old address.
      turn_off("module parameters or buffers moved " + std::to_string(recordings_) +
               " times after recording");
      return graph_->run(inputs);
    } else {
      ++recordings_;
    }
    if (!record(inputs)) return graph_->run(inputs);
    break;
  }
  return replay(inputs);
}

bool CudaGraphReplay::record(const std::vector<at::Tensor>& inputs) {
  if (c10::GradMode::is_enabled()) {
    for (const at::Tensor& t : inputs) {
      if (t.requires_grad()) {
        turn_off("autograd records the graph (an input requires grad)");
        return false;
      }
    }
  }
  // An argument that is the warm-up call's tensor at the same address is read where it
  // lies, unless it shares memory with another input or lies in this graph's pool (an
  // earlier result still held).
  std::vector<bool> reads_in_place = in_place_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (in_place_[i] || always_copy_[i] || !t.defined() ||
        t.unsafeGetTensorImpl() != warm_up_tensors_[i] || t.data_ptr() != warm_up_addresses_[i])
      continue;
    bool alone = true;
    for (size_t j = 0; j < inputs.size(); ++j) {
      alone = alone && (j == i || storage_of(inputs[j]) != storage_of(t));
    }
    for (const at::Tensor& out : outputs_) alone = alone && storage_of(out) != storage_of(t);
    reads_in_place[i] = alone;
  }
  std::vector<at::Tensor> statics;
  statics.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (reads_in_place[i]) {
      statics.push_back(t);
      continue;
    }
    if (!t.is_non_overlapping_and_dense()) {
      turn_off("argument " + std::to_string(i) + " overlaps itself or has gaps (strides " +
               c10::str(t.strides()) + ")");
      return false;
    }
    for (size_t j = 0; j < i; ++j) {
      if (!reads_in_place[j] && storage_of(inputs[j]) == storage_of(t)) {
        turn_off("arguments " + std::to_string(j) + " and " + std::to_string(i) + " share memory");
        return false;
      }
    }
    at::Tensor copy = at::empty_strided(t.sizes(), t.strides(), t.options());
    copy.copy_(t);
    statics.push_back(std::move(copy));
  }
  static PyObject* begin = helper("begin");
  static PyObject* end = helper("end");
  if (begin == nullptr || end == nullptr) {
    turn_off("dynvm._cuda_graphs is missing: " + take_python_error());
    return false;
  }
  PyRef recording = PyRef::steal(PyObject_CallNoArgs(begin));
  if (!recording) {
    turn_off("cannot start recording: " + take_python_error());
    return false;
  }
  std::vector<at::Tensor> outputs;
  std::string failure;
  try {
    outputs = graph_->run(statics);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  PyRef ended = PyRef::steal(PyObject_CallFunctionObjArgs(
      end, recording.get(), failure.empty() ? Py_False : Py_True, nullptr));
  if (!ended && failure.empty()) failure = take_python_error();
  PyErr_Clear();
  if (!failure.empty()) {
    turn_off("recording failed: " + failure);
    return false;
  }
  // Outputs that are views of arguments would be views of the static buffers; two outputs
  // sharing memory would stop sharing it once copied out.
  std::vector<int> output_of_input(outputs.size(), -1);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const c10::StorageImpl* storage = storage_of(outputs[o]);
    for (size_t i = 0; i < statics.size(); ++i) {
      if (storage == nullptr || storage != storage_of(statics[i])) continue;
      if (!reads_in_place[i]) {
        turn_off("output " + std::to_string(o) + " is a view of argument " + std::to_string(i));
        return false;
      }
      output_of_input[o] = static_cast<int>(i);
    }
    for (size_t p = 0; p < o && output_of_input[o] < 0; ++p) {
      if (storage != nullptr && output_of_input[p] < 0 && storage_of(outputs[p]) == storage) {
        turn_off("outputs " + std::to_string(p) + " and " + std::to_string(o) + " share memory");
        return false;
      }
    }
  }
  outputs_.clear();  // a previous recording's outputs (released in run()) go before the
                     // graph owning their pool
  cuda_graph_ = PyRef::steal(PySequence_GetItem(recording.get(), 0));
  replay_method_ =
      cuda_graph_ ? PyRef::steal(PyObject_GetAttrString(cuda_graph_.get(), "replay")) : PyRef();
  if (!replay_method_) {
    turn_off("no replay(): " + take_python_error());
    return false;
  }
  graph_exec_ = nullptr;
  if (!draws_random_) {
    PyRef exec =
        PyRef::steal(PyObject_CallMethod(cuda_graph_.get(), "raw_cuda_graph_exec", nullptr));
    if (exec) graph_exec_ = PyLong_AsVoidPtr(exec.get());
    if (!exec || PyErr_Occurred()) {
      PyErr_Clear();  // an older torch: replay() serves
      graph_exec_ = nullptr;
    }
  }
  device_ = 0;
  for (const at::Tensor& t : statics) {
    if (t.defined() && t.is_cuda()) device_ = t.device().index();
  }
  recorded_addresses_.clear();
  for (const at::Tensor& t : statics) recorded_addresses_.push_back(t.data_ptr());
  statics_ = std::move(statics);
  reads_in_place_ = std::move(reads_in_place);
  outputs_ = std::move(outputs);
  output_of_input_ = std::move(output_of_input);
  if (state_ == State::WarmingUp) ++recordings_;
  state_ = State::Replaying;
  run_report().cuda_graphs.push_back({where_, note()});
  if (log_enabled("cudagraphs")) {
    std::fprintf(
        stderr, "dynvm: %s: recorded a CUDA graph (%zu inputs, %zu copied per call)\n",
        where_.c_str(), inputs.size(),
        static_cast<size_t>(std::count(reads_in_place_.begin(), reads_in_place_.end(), false)));
  }
  return true;
}

std::vector<at::Tensor> CudaGraphReplay::replay(const std::vector<at::Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!reads_in_place_[i] && inputs[i].data_ptr() != statics_[i].data_ptr()) {
      copy_tensor(statics_[i], inputs[i]);
    }
  }
  if (graph_exec_ != nullptr) {
    std::string error = codegen::cuda_graph_launch(device_, graph_exec_, current_stream(device_));
    if (!error.empty()) throw std::runtime_error("dynvm: CUDA graph replay failed: " + error);
  } else {
    PyRef done = PyRef::steal(PyObject_CallNoArgs(replay_method_.get()));
    if (!done) throw std::runtime_error("dynvm: CUDA graph replay failed: " + take_python_error());
  }
  for (size_t i : written_) {
    if (!reads_in_place_[i] && inputs[i].data_ptr() != statics_[i].data_ptr()) {
      copy_tensor(inputs[i], statics_[i]);
    }
  }
  // Each result shares the pool's storage; release_held_outputs moves what the caller
  // still holds before the next replay writes there.
  std::vector<at::Tensor> outputs;
  outputs.reserve(outputs_.size());
  for (const at::Tensor& out : outputs_) outputs.push_back(out.defined() ? out.alias() : out);
  return outputs;
}

void CudaGraphReplay::release_held_outputs() {
  for (size_t o = 0; o < outputs_.size(); ++o) {
    at::Tensor& out = outputs_[o];
    if (!out.defined() || output_of_input_[o] >= 0 || !out.has_storage()) continue;
    c10::StorageImpl* held = out.storage().unsafeGetStorageImpl();
    if (out.storage().use_count() <= 1) continue;  // only ours: the caller dropped it
    // The caller's tensors keep the StorageImpl and get a copy of its bytes; the pool's
    // bytes go to a new storage of ours, where the graph writes next.
    size_t bytes = held->nbytes();
    at::Tensor fresh = at::empty({static_cast<int64_t>(bytes)}, out.options().dtype(at::kByte));
    int device = out.device().index();
    std::string error = codegen::cuda_copy_async(device, fresh.data_ptr(), held->data(), bytes,
                                                 current_stream(device));
    if (!error.empty()) throw std::runtime_error("dynvm: keeping a CUDA graph's result: " + error);
    c10::DataPtr fresh_bytes =
        fresh.storage().unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(nullptr, fresh.device()));
    c10::DataPtr pool_bytes = held->set_data_ptr(std::move(fresh_bytes));
    c10::Storage ours(c10::Storage::use_byte_size_t(), bytes, std::move(pool_bytes), nullptr,
                      /*resizable=*/false);
    at::Tensor moved = at::empty({0}, out.options());
    moved.set_(ours, out.storage_offset(), out.sizes(), out.strides());
    out = std::move(moved);
  }
}

}  // namespace dynvm::runtime
