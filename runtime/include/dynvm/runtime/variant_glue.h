// The run half of a variant's native function: after the compiled guards (guard_glue.h), the
// glue binds the graph's inputs to a run frame, runs the graph's steps (codegen/run_glue.h)
// and, when the return value is a tensor or a plain tuple of tensors and constants with
// nothing else to replay, packs it into the Python object the call returns.
#pragma once

#include <Python.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "dynvm/codegen/glue_ir.h"
#include "dynvm/vm/trace.h"

namespace dynvm::codegen {
class CompiledGraph;
}

namespace dynvm::runtime {

// What a variant's native function does after its guards.
struct GlueRun {
  const codegen::CompiledGraph* graph = nullptr;
  // Per graph input: the guards' source slot holding it, or -1 for a captured tensor.
  std::vector<int> input_sources;
  std::vector<PyObject*> captured;  // per graph input with no source (borrowed)
  // The return value's recipe when the glue can pack it (packable() said so), else nullptr.
  const vm::OutputRecipe* pack = nullptr;
};

// Whether the glue packs `trace`'s return value: a graph output, or a plain tuple of graph
// outputs and constants, with no side effects to replay and no graph break to resume at.
bool packable(const vm::Trace& trace);

// Where the run keeps what the caller must release. Slots [0, ref_slots) hold new references
// or 0; frame_slot the RunFrame (or 0); result_slot (when >= 0) the packed return value.
struct GlueRunSlots {
  int ref_slots = 0;
  int frame_slot = -1;
  int result_slot = -1;
};

// Appends the run to `program`, whose slots [0, program.slot_count) are taken (references);
// `source_value(slot, fail_code)` gives the value number of a guard source, reading it when
// the guards did not. Every failure returns `fail_code`. Grows program.slot_count.
GlueRunSlots lower_glue_run(codegen::GlueProgram& program, const GlueRun& run,
                            const std::function<int(int, int64_t)>& source_value,
                            int64_t fail_code);

}  // namespace dynvm::runtime
