// CudaGraphReplay: mode="reduce-overhead". A variant's whole graph run is recorded once as
// a CUDA graph (torch.cuda.CUDAGraph, in a private memory pool) after a warm-up run, and
// later calls replay it. Module parameters and buffers are read where they live, and so is
// an argument that is the same tensor at the same address on the warm-up and recording
// calls; other arguments are copied into the graph's static buffers, and inputs the graph
// writes are copied back. Outputs are handed out as they lie in the pool: before the next
// replay overwrites them, every output the caller still holds is moved out of the pool
// (its bytes copied to fresh memory, which the caller's tensors then own), so a result
// never changes under the caller and no copy is made for a result that was dropped. What
// cannot be recorded runs as plain calls, and note() says why.
#pragma once

#include <Python.h>

#include <cstddef>
#include <string>
#include <vector>

#include "dynvm/support/py_ref.h"

namespace at {
class Tensor;
}
namespace dynvm::codegen {
class CompiledGraph;
}
namespace dynvm::graph {
class Graph;
}

namespace dynvm::runtime {

class CudaGraphReplay {
 public:
  // Why `graph`, as `compiled` runs it, cannot be a CUDA graph (its tensors are not all on
  // one CUDA device, it runs op by op), or "" when it may be.
  static std::string why_not(const graph::Graph& graph, const codegen::CompiledGraph& compiled);

  // `graph` runs `captured` (the graph as traced). `in_place[i]`: graph input i is read
  // where it lives (a module's parameter or buffer, a captured tensor), so the recording
  // holds its address; other inputs are arguments. `where` names the graph in notes
  // ("f (file.py:3)").
  CudaGraphReplay(const codegen::CompiledGraph* graph, const graph::Graph& captured,
                  std::vector<bool> in_place, std::string where);
  ~CudaGraphReplay();
  CudaGraphReplay(const CudaGraphReplay&) = delete;
  CudaGraphReplay& operator=(const CudaGraphReplay&) = delete;

  // GIL held. Runs the graph on this call's inputs: a plain run while warming up or when the
  // graph cannot be recorded, else a replay. Throws as CompiledGraph::run does.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs);

  // "replays as a CUDA graph", "records a CUDA graph after N more calls", or
  // "not a CUDA graph: <why>".
  std::string note() const;
  bool replaying() const { return state_ == State::Replaying; }
  int recordings() const { return recordings_; }

  // Calls run plainly before the first recording (the first call compiles kernels and
  // initialises libraries, which a recording must not capture).
  static constexpr int kWarmupCalls = 1;
  // Recordings made again because a parameter moved, before giving up on the graph. An
  // argument read where it lay that moves is copied from then on: one more recording each.
  static constexpr int kMaxRecordings = 4;

 private:
  enum class State { WarmingUp, Replaying, Off };
  // Records the graph on static copies of `inputs`; false (state Off) when it cannot.
  bool record(const std::vector<at::Tensor>& inputs);
  std::vector<at::Tensor> replay(const std::vector<at::Tensor>& inputs);
  // Moves every output the caller still holds out of the pool, before a replay or a new
  // recording reuses it.
  void release_held_outputs();
  void turn_off(std::string why);

  const codegen::CompiledGraph* graph_;
  std::vector<bool> in_place_;
  // per input: an argument the current recording reads where it lay (its address was the
  // same on the warm-up call), or a parameter/buffer (in_place_)
  std::vector<bool> reads_in_place_;
  std::vector<bool> always_copy_;               // per input: an argument that moved once
  std::vector<const void*> warm_up_addresses_;  // per input, on the last warm-up call:
  std::vector<const void*> warm_up_tensors_;    // its data's address and its TensorImpl
  std::vector<size_t> written_;                 // inputs the graph writes back into
  std::string where_;
  State state_ = State::WarmingUp;
  int warmups_left_ = kWarmupCalls;
  int recordings_ = 0;  // recordings made because a parameter or buffer moved, plus one
  std::string why_off_;
  std::vector<at::Tensor> statics_;  // per input: the buffer the recording reads
  // per input: the address the recording reads (a parameter's tensor is shared with the
  // module, whose .data may be replaced under it)
  std::vector<const void*> recorded_addresses_;
  std::vector<at::Tensor> outputs_;   // the recording's outputs, in its pool
  std::vector<int> output_of_input_;  // per output: the in-place input it is a view of, or -1
  PyRef cuda_graph_;                  // torch.cuda.CUDAGraph
  PyRef replay_method_;               // its bound replay()
  // Its instantiated graph (CUgraphExec), launched straight through the driver, or nullptr:
  // replay() then goes through torch, which a graph drawing random numbers needs (it
  // advances the generator's offsets around the launch).
  void* graph_exec_ = nullptr;
  bool draws_random_ = false;
  int device_ = 0;
};

}  // namespace dynvm::runtime
