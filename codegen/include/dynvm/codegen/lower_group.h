// Lowering one fused group (a graph of primitive ATen ops, docs/loop_ir.md) to a loop kernel.
#pragma once

#include <string>

#include "dynvm/codegen/loop_ir.h"
#include "dynvm/graph/graph.h"
#include "dynvm/support/expected.h"

namespace dynvm::codegen {

// Buffers: the group's inputs in order (named after them), then one output buffer per
// graph output (out0, out1, …) laid out with that output's strides. Pointwise groups
// loop over the output shape; reduction groups (all reductions over the same dims of the
// same shape) loop over rows (the kept dims) with the reductions and the full-shape
// outputs inside each row; innermost reduced dims give contiguous rows. An
// operator outside the primitive set, or a shape the scheme cannot express, is an Error
// (the group then runs through ATen).
struct LowerOptions {
  // Reductions over outer dims of data whose kept dims are contiguous (column sums) run in
  // blocks of contiguous kept elements with per-block accumulators, as suits a CPU core's
  // cache lines. Off, they reduce one kept element at a time with a strided reduction,
  // which the CUDA target spreads over threads (adjacent threads, adjacent columns).
  bool column_blocks = true;
  // float32 sums accumulate in float64 (rounded to float32 once, at the end): a sum over
  // many elements (batch norm's statistics over N*H*W) is then at least as accurate as
  // ATen's cascade sum. The CPU keeps it (its reductions are memory-bound); the CUDA
  // target accumulates in float32, as ATen's CUDA kernels do.
  bool double_float_sums = true;
};

Expected<LoopKernel> lower_group(const graph::Graph& group, const std::string& kernel_name,
                                 const LowerOptions& options = {});

}  // namespace dynvm::codegen
