// Lowering the eager backend's plan to glue: the helpers the glue calls on a RunFrame, and
// the instructions that call them (and the fused kernels) step by step.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/codegen/glue_ir.h"
#include "dynvm/codegen/run_glue.h"
#include "executor/aten_dtype.h"
#include "executor/aten_plan.h"

namespace dynvm::codegen {

void run_frame_set_input(RunFrame& frame, size_t index, const at::Tensor& tensor) {
  if (!frame.inputs.empty()) frame.inputs.at(index) = tensor;
  int32_t slot = frame.state.plan.input_slots.at(index);
  if (slot >= 0) frame.state.slots[static_cast<size_t>(slot)] = tensor;
}

const at::Tensor& run_frame_output(const RunFrame& frame, size_t index) {
  if (frame.outputs) return frame.outputs->at(index);
  int32_t slot = frame.state.plan.graph_output_slots.at(index);
  return frame.state.slots[static_cast<size_t>(slot)].toTensor();
}

std::vector<at::Tensor> run_frame_outputs(const RunFrame& frame) {
  if (frame.outputs) return *frame.outputs;
  std::vector<at::Tensor> outputs;
  outputs.reserve(frame.state.plan.graph_output_slots.size());
  for (size_t i = 0; i < frame.state.plan.graph_output_slots.size(); ++i) {
    outputs.push_back(run_frame_output(frame, i));
  }
  return outputs;
}

void run_frame_finish(RunFrame& frame) {
  if (!frame.outputs) frame.outputs = run_frame_outputs(frame);
  frame.unread.clear();
  frame.inputs.clear();
  frame.state.slots.clear();
  frame.state.arena.reset();  // after the slots: views of it may be among them
  frame.state.restore_grad_mode.reset();
}

const std::string& run_frame_error(const RunFrame& frame) { return frame.error; }
void run_frame_fail(RunFrame& frame, std::string message) { frame.error = std::move(message); }
void delete_run_frame(RunFrame* frame) { delete frame; }

namespace {

// Helpers the glue calls. They never throw: 0 is success, 1 a failure whose message is in
// the frame.

int64_t fail_with(RunFrame& frame) noexcept {
  try {
    throw;
  } catch (const c10::Error& error) {
    frame.error = error.what_without_backtrace();
  } catch (const std::exception& error) {
    frame.error = error.what();
  } catch (...) {
    frame.error = "unknown C++ exception";
  }
  return 1;
}

// A new RunFrame (0 when out of memory), keeping its inputs when `keep_inputs`.
int64_t glue_begin_run(int64_t plan, int64_t arenas, int64_t keep_inputs) noexcept {
  try {
    const auto& p = *glue_pointer<const AtenExecutor::Plan>(plan);
    auto frame = std::make_unique<RunFrame>(p, *glue_pointer<AtenExecutor::ArenaCache>(arenas));
    if (keep_inputs != 0) frame->inputs.resize(p.input_slots.size());
    return glue_word(frame.release());
  } catch (...) {
    return 0;
  }
}

// Every step, or the graph op by op when its mutated inputs overlap others (AliasFallback).
int64_t glue_run_checking_overlap(int64_t frame, int64_t fallback) noexcept {
  RunFrame& f = *glue_pointer<RunFrame>(frame);
  try {
    const auto& fb = *glue_pointer<const AliasFallback>(fallback);
    if (inputs_overlap(f.inputs, fb.mutated_inputs)) {
      f.outputs = fb.op_by_op->run(f.inputs);
      return 0;
    }
    for (const exec::Step& step : f.state.plan.steps) exec::run_step(f.state, step);
    return 0;
  } catch (...) {
    return fail_with(f);
  }
}

int64_t glue_run_step(int64_t frame, int64_t step) noexcept {
  RunFrame& f = *glue_pointer<RunFrame>(frame);
  try {
    exec::run_step(f.state, f.state.plan.steps[static_cast<size_t>(step)]);
    return 0;
  } catch (...) {
    return fail_with(f);
  }
}

// Kernel input: the data pointer of slot `slot`, checked against `meta`, written to `*out`.
int64_t glue_input_data(int64_t frame, int64_t slot, int64_t meta, int64_t out) noexcept {
  RunFrame& f = *glue_pointer<RunFrame>(frame);
  try {
    const at::Tensor& t = f.state.slots[static_cast<size_t>(slot)].toTensor();
    if (!CpuKernel::fits_cpu(t, *glue_pointer<const graph::TensorMeta>(meta))) {
      f.error =
          "a fused kernel's input has another dtype, device or layout than the kernel "
          "was compiled for";
      return 1;
    }
    *glue_pointer<void*>(out) = const_cast<void*>(t.data_ptr());
    return 0;
  } catch (...) {
    return fail_with(f);
  }
}

// Kernel output: where `placement` puts it (an input written in place, a view of the
// arena, a fresh tensor), or without one a fresh tensor laid out as `meta`; kept in slot `slot`
// (-1: in `unread`), its data pointer written to `*out`.
int64_t glue_new_output(int64_t frame, int64_t slot, int64_t placement, int64_t meta,
                        int64_t out) noexcept {
  RunFrame& f = *glue_pointer<RunFrame>(frame);
  try {
    const auto* p = glue_pointer<const exec::Placement>(placement);
    at::Tensor t;
    if (p != nullptr) {
      t = exec::placed_output(f.state, *p);
    } else {
      const auto& m = *glue_pointer<const graph::TensorMeta>(meta);
      t = at::empty_strided(m.sizes, m.strides, at::TensorOptions().dtype(to_scalar_type(m.dtype)));
    }
    *glue_pointer<void*>(out) = t.data_ptr();
    if (slot >= 0) {
      f.state.slots[static_cast<size_t>(slot)] = std::move(t);
    } else {
      f.unread.push_back(std::move(t));
    }
    return 0;
  } catch (...) {
    return fail_with(f);
  }
}

// A kernel whose loop is split across threads or needs temporaries.
int64_t glue_run_kernel(int64_t frame, int64_t kernel, int64_t buffers) noexcept {
  try {
    glue_pointer<const CpuKernel>(kernel)->run_buffers(glue_pointer<void* const>(buffers));
    return 0;
  } catch (...) {
    return fail_with(*glue_pointer<RunFrame>(frame));
  }
}

// The end of a kernel step: the slots it read last, and its unread outputs, released.
int64_t glue_end_step(int64_t frame, int64_t step) noexcept {
  RunFrame& f = *glue_pointer<RunFrame>(frame);
  exec::release_last_uses(f.state, f.state.plan.steps[static_cast<size_t>(step)]);
  f.unread.clear();
  return 0;
}

class RunLowering {
 public:
  RunLowering(GlueProgram& program, int frame, int64_t fail_code)
      : program_(program), frame_(frame), fail_code_(fail_code) {}

  // Calls `helper` and fails the function unless it returns 0.
  void call_checked(const char* name, int arity, const void* address, std::vector<int> args) {
    int helper = program_.add_helper(name, arity, address);
    program_.check_eq(program_.call(helper, std::move(args)), zero(), fail_code_);
  }

  int zero() {
    if (zero_ < 0) zero_ = program_.constant(0);
    return zero_;
  }

  void generic_step(size_t index) {
    call_checked("run_step", 2, reinterpret_cast<const void*>(&glue_run_step),
                 {frame_, program_.constant(static_cast<int64_t>(index))});
  }

  void kernel_step(const AtenExecutor::Plan& plan, size_t index, const CpuKernel& kernel,
                   int64_t scratch) {
    const exec::Step& step = plan.steps[index];
    const std::vector<graph::TensorMeta>& in_metas = kernel.input_metas();
    const std::vector<graph::TensorMeta>& out_metas = kernel.output_metas();
    int64_t buffer = scratch;
    for (uint32_t a = step.args_begin; a < step.args_end; ++a, ++buffer) {
      const graph::TensorMeta& meta = in_metas.at(a - step.args_begin);
      call_checked("input_data", 4, reinterpret_cast<const void*>(&glue_input_data),
                   {frame_, program_.constant(plan.arguments[a].slot),
                    program_.constant_address(&meta), program_.slot_address(buffer)});
    }
    for (uint32_t i = 0; i < step.outputs_end - step.outputs_begin; ++i, ++buffer) {
      const exec::Placement* placement =
          step.placements_begin >= 0
              ? &plan.placements[static_cast<size_t>(step.placements_begin) + i]
              : nullptr;
      call_checked("new_output", 5, reinterpret_cast<const void*>(&glue_new_output),
                   {frame_, program_.constant(plan.output_slots[step.outputs_begin + i]),
                    program_.constant_address(placement),
                    program_.constant_address(&out_metas.at(i)), program_.slot_address(buffer)});
    }
    int buffers = program_.slot_address(scratch);
    if (kernel.runs_in_one_call()) {
      // The compiled loop itself, called from here: void fn(buffers, dims, begin, end).
      std::string name = kernel.loop_kernel().name;
      int function = program_.add_helper(
          name, 4, reinterpret_cast<const void*>(kernel.compilation().function));
      program_.call(function,
                    {buffers, zero(), zero(), program_.constant(kernel.parallel_extent())});
    } else {
      call_checked("run_kernel", 3, reinterpret_cast<const void*>(&glue_run_kernel),
                   {frame_, program_.constant_address(&kernel), buffers});
    }
    if (step.releases_end > step.releases_begin || !unread_free(plan, step)) {
      call_checked("end_step", 2, reinterpret_cast<const void*>(&glue_end_step),
                   {frame_, program_.constant(static_cast<int64_t>(index))});
    }
  }

 private:
  static bool unread_free(const AtenExecutor::Plan& plan, const exec::Step& step) {
    for (uint32_t i = step.outputs_begin; i < step.outputs_end; ++i) {
      if (plan.output_slots[i] < 0) return false;
    }
    return true;
  }

  GlueProgram& program_;
  int frame_;
  int64_t fail_code_;
  int zero_ = -1;
};

}  // namespace

int AtenExecutor::lower_run_begin(GlueProgram& program, int64_t frame_slot, int64_t fail_code,
                                  bool keep_inputs) const {
  int begin = program.add_helper("begin_run", 3, reinterpret_cast<const void*>(&glue_begin_run));
  int frame = program.call(
      begin, {program.constant_address(plan_.get()), program.constant_address(arenas_.get()),
              program.constant(keep_inputs ? 1 : 0)});
  program.store(frame_slot, frame);
  program.check_nonzero(frame, fail_code);
  return frame;
}

void AtenExecutor::lower_run_steps(GlueProgram& program, int frame, int64_t fail_code,
                                   const std::vector<const FusedKernel*>& kernel_of_group,
                                   const AliasFallback* fallback) const {
  const Plan& plan = *plan_;
  if (fallback != nullptr) {
    RunLowering(program, frame, fail_code)
        .call_checked("run_checking_overlap", 2,
                      reinterpret_cast<const void*>(&glue_run_checking_overlap),
                      {frame, program.constant_address(fallback)});
    return;
  }
  // Kernel steps pass their data pointers in slots from here on, reused step after step.
  int64_t scratch = program.slot_count;
  int64_t widest = 0;
  RunLowering lowering(program, frame, fail_code);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const exec::Step& step = plan.steps[i];
    // CPU kernels are called from the glue directly; other targets' run as generic steps.
    const FusedKernel* fused =
        step.group >= 0 && static_cast<size_t>(step.group) < kernel_of_group.size()
            ? kernel_of_group[static_cast<size_t>(step.group)]
            : nullptr;
    const CpuKernel* kernel = fused != nullptr ? fused->as_cpu() : nullptr;
    uint32_t buffers = (step.args_end - step.args_begin) + (step.outputs_end - step.outputs_begin);
    if (kernel == nullptr ||
        buffers != kernel->input_metas().size() + kernel->output_metas().size()) {
      lowering.generic_step(i);
      continue;
    }
    widest = std::max<int64_t>(widest, buffers);
    lowering.kernel_step(plan, i, *kernel, scratch);
  }
  program.slot_count = static_cast<int>(scratch + widest);
}

}  // namespace dynvm::codegen
