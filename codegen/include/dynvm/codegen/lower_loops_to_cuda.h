// The CUDA target's lowering: a loop kernel as CUDA C++ source for NVRTC, with the launch
// shape it needs (docs/cuda_target.md). Text only: no CUDA header, no ATen, no LLVM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dynvm/codegen/loop_ir.h"
#include "dynvm/codegen/lower_group.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

// How the parallel loop maps onto the GPU.
#define DYNVM_CUDA_SCHEMES(X)                                                                     \
  X(Flat, "flat")                 /* one thread per iteration of the flattened outer loop nest */ \
  X(RowPerBlock, "row-per-block") /* one block per parallel iteration; reductions are */          \
  /* split across the block's threads (warp shuffles, then shared memory) */                      \
  X(ColumnSplit, "column-split") /* flat over the columns (iterations), with each column's */     \
  /* rows split across blocks: CudaLaunch::split_parts */

enum class CudaScheme : uint8_t {
#define DYNVM_CUDA_SCHEME_ENUM(e, name) e,
  DYNVM_CUDA_SCHEMES(DYNVM_CUDA_SCHEME_ENUM)
#undef DYNVM_CUDA_SCHEME_ENUM
};

std::string_view cuda_scheme_name(CudaScheme scheme);

struct CudaLaunch {
  CudaScheme scheme = CudaScheme::Flat;
  int block_threads = 256;
  int64_t iterations = 1;  // threads (Flat) or blocks (RowPerBlock) the work asks for
  int64_t max_blocks = 1;  // the grid is min(blocks the work asks for, max_blocks)
  // Temporaries: elements per slot of each temp buffer, in buffer order; a slot is one
  // thread (Flat) or one block (RowPerBlock). The caller passes one scratch pointer per
  // temp buffer, sized grid slots times this. 0: the kernel keeps that temporary in
  // registers (a persistent row) and never addresses its pointer.
  std::vector<int64_t> temp_elements;
  // The flat scheme's vectorized variant (function `<name>_v<lanes>`), when there is one:
  // each thread runs `vector_lanes` contiguous iterations with vector loads and stores of
  // `vector_buffers` (buffer indices), whose data pointers must be aligned to lanes times
  // their element size; otherwise the scalar kernel runs. 0: no vectorized variant.
  int vector_lanes = 0;
  std::vector<int> vector_buffers;
  // Few long rows with one reduction each (a full sum, a norm): each row is split across
  // `split_parts` blocks, which fold their parts into `split_parts` partials per row; the
  // last block of a row to finish (counted in `arrivals`) folds the partials and runs the
  // rest of the row. The caller passes two more pointers after the temps: the partials
  // (rows times split_parts values of `split_type`) and the arrivals (rows unsigned 32-bit
  // counters, zero before the launch). 0: rows are not split.
  //
  // The column-split scheme splits the other way: each of the few columns (iterations)
  // folds `split_reductions` reductions over rows, and loops over the same rows may write
  // full-size outputs. Block b takes columns (b / split_parts) * block_threads onwards and
  // part b % split_parts of their rows; partials are split_reductions times split_parts
  // times columns values, arrivals one counter per block of columns, and the last block
  // of a column block folds the partials and runs what uses the reductions.
  int64_t split_parts = 0;
  graph::DType split_type = graph::DType::Float32;
  int64_t split_reductions = 1;
  int64_t grid(bool vectorized = false) const;  // blocks to launch
  int64_t scratch_slots() const;                // slots the temporaries need
  int64_t split_partial_count() const;          // values in the partials buffer
  int64_t split_counter_count() const;          // arrival counters
  int64_t column_blocks() const;                // column-split: blocks of columns
};

struct CudaKernelSource {
  std::string name;    // the __global__ function, extern "C"
  std::string source;  // the whole translation unit
  CudaLaunch launch;
};

// What a tuner may choose instead of the lowering's own heuristics (mode="max-autotune").
struct CudaSchedule {
  int block_threads = 0;  // threads per block, a multiple of 32 up to 1024; 0: the lowering's
};

// How the caller passes some buffers (indices into the kernel's buffers).
struct CudaBufferUse {
  // One-element inputs passed by value, as the storage type itself: a CPU scalar tensor,
  // as ATen's CUDA kernels take CPU scalars (an optimizer's step count).
  std::vector<int> by_value;
  // Buffers that may share memory with another (an output written in place into an
  // input: graph/in_place_outputs.h): their pointers are not __restrict__.
  std::vector<int> may_alias;
};

// The kernel's parameters are its buffers in order (temps last, as declared), each a
// pointer to the buffer's storage type (f16 and bf16 as 16-bit integers, bool as bool),
// except those `use` passes by value; then the split pointers (CudaLaunch::split_parts);
// last, the launch's iterations as a `long long`. The source never spells the iterations
// out, so kernels that differ only in the parallel loop's extent (a batch or sequence
// dimension) have one source, one NVRTC compile and one disk-cache entry. An op or shape
// the lowering cannot express is an Error.
Expected<CudaKernelSource> lower_loops_to_cuda(const LoopKernel& kernel,
                                               const CudaSchedule& schedule = {},
                                               const CudaBufferUse& use = {});

// The inputs of a CUDA group that are CPU scalar tensors (0-dim), by index (buffer i is
// input i): what lower_loops_to_cuda takes by value.
std::vector<int> cuda_value_buffers(const graph::Graph& group);

// The schedules worth timing against `chosen` (the lowering's own launch): half and twice
// its block, where those are 32 to 1024 threads and the work fills them. Not `chosen`'s.
std::vector<CudaSchedule> cuda_schedule_candidates(const CudaLaunch& chosen);

// How groups are lowered for this target (lower_group's options), and the loop passes
// (loop_pass_runner.h) run on them before lower_loops_to_cuda.
LowerOptions cuda_lower_options();
std::vector<std::string> cuda_loop_passes();

// The helpers every generated source starts with (16-bit float conversions, NaN-propagating
// max/min, the block reduction), followed by a blank line.
std::string_view cuda_prelude();

// One line for logs and golden files: "row-per-block, 256 threads, 64 blocks of 1 iteration
// (grid 64), temps []".
std::string describe(const CudaLaunch& launch);

}  // namespace dynvm::codegen
