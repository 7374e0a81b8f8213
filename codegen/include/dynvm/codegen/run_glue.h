// A compiled graph's run as glue (glue_ir.h), the second half of a variant's native function:
// after the runtime's guards and argument binding, the glue starts a run frame, runs every
// step in order (fused kernels called directly on the data pointers of outputs it allocated,
// ATen calls through one helper each) and leaves the graph's outputs in the frame for the
// runtime to pack. The lowering is CompiledGraph::lower_run_begin / lower_run_steps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace dynvm::codegen {

// One run in progress, made by the glue and deleted by whoever called the glue function.
class RunFrame;

// Graph input `index` of the run (ignored when the graph never reads it).
void run_frame_set_input(RunFrame& frame, size_t index, const at::Tensor& tensor);
// After every step ran: graph output `index`, and all of them.
const at::Tensor& run_frame_output(const RunFrame& frame, size_t index);
std::vector<at::Tensor> run_frame_outputs(const RunFrame& frame);
// After every step ran: keeps the outputs and releases everything else (intermediates, the
// arena) and restores the grad mode found at the run's start, as AtenExecutor::run does on
// return; outputs stay readable until the frame is deleted.
void run_frame_finish(RunFrame& frame);
// Why the run stopped (a step's error, or what run_frame_fail recorded); "" when it did not.
const std::string& run_frame_error(const RunFrame& frame);
void run_frame_fail(RunFrame& frame, std::string message);
// Ends the run: releases its tensors and arena and restores the grad mode found at its start.
void delete_run_frame(RunFrame* frame);

}  // namespace dynvm::codegen
