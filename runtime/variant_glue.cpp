// Lowering a variant's run into its native function: the Python-facing helpers (binding
// tensors, wrapping and packing results) and the instructions around the graph's steps.
#include "dynvm/runtime/variant_glue.h"

#include <torch/csrc/autograd/python_variable.h>

#include <string>

#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/codegen/run_glue.h"

namespace dynvm::runtime {

namespace {

using codegen::glue_pointer;
using codegen::glue_word;

// Helpers the glue calls (GIL held). They never throw and leave no Python error set; a
// failure is recorded in the frame.

// Graph input `index` is the tensor `object` (borrowed): 0, or 1 when it is no tensor.
int64_t glue_bind_input(int64_t frame, int64_t index, int64_t object) noexcept {
  auto& f = *glue_pointer<codegen::RunFrame>(frame);
  try {
    PyObject* o = glue_pointer<PyObject>(object);
    if (o == nullptr || !THPVariable_Check(o)) {
      codegen::run_frame_fail(f, "dynvm: internal error: a graph input is not a tensor");
      return 1;
    }
    codegen::run_frame_set_input(f, static_cast<size_t>(index), THPVariable_Unpack(o));
    return 0;
  } catch (...) {
    codegen::run_frame_fail(f, "dynvm: internal error: cannot bind a graph input");
    return 1;
  }
}

// A new reference to graph output `index` as a Python tensor, or 0.
int64_t glue_wrap_output(int64_t frame, int64_t index) noexcept {
  auto& f = *glue_pointer<codegen::RunFrame>(frame);
  try {
    PyObject* wrapped = THPVariable_Wrap(codegen::run_frame_output(f, static_cast<size_t>(index)));
    if (wrapped == nullptr) {
      PyErr_Clear();
      codegen::run_frame_fail(f, "dynvm: cannot wrap a graph output");
    }
    return glue_word(wrapped);
  } catch (...) {
    if (PyErr_Occurred()) PyErr_Clear();
    codegen::run_frame_fail(f, "dynvm: cannot wrap a graph output");
    return 0;
  }
}

int64_t glue_new_ref(int64_t object) noexcept {
  return glue_word(Py_NewRef(glue_pointer<PyObject>(object)));
}

// A tuple of the `count` new references in slots from `items`, which it takes (the slots are
// zeroed), or 0 (the references stay where they are, for the caller to release).
int64_t glue_pack_tuple(int64_t count, int64_t items) noexcept {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(count));
  if (tuple == nullptr) {
    PyErr_Clear();
    return 0;
  }
  auto* words = glue_pointer<int64_t>(items);
  for (int64_t i = 0; i < count; ++i) {
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), glue_pointer<PyObject>(words[i]));
    words[i] = 0;
  }
  return glue_word(tuple);
}

bool simple_item(const vm::OutputRecipe& r) {
  using Kind = vm::OutputRecipe::Kind;
  if (r.memo >= 0) return false;
  return r.kind == Kind::GraphOutput ||
         ((r.kind == Kind::Constant || r.kind == Kind::Size) && r.constant);
}

}  // namespace

bool packable(const vm::Trace& trace) {
  if (trace.resume || trace.graph_break || !trace.side_effects.empty()) return false;
  const vm::OutputRecipe& out = trace.output;
  if (out.kind == vm::OutputRecipe::Kind::GraphOutput) return out.memo < 0;
  if (out.kind != vm::OutputRecipe::Kind::Tuple || out.constant || out.memo >= 0) return false;
  for (const vm::OutputRecipe& item : out.items) {
    if (!simple_item(item)) return false;
  }
  return true;
}

GlueRunSlots lower_glue_run(codegen::GlueProgram& program, const GlueRun& run,
                            const std::function<int(int, int64_t)>& source_value,
                            int64_t fail_code) {
  GlueRunSlots slots;
  const vm::OutputRecipe* pack = run.pack;
  bool tuple = pack != nullptr && pack->kind == vm::OutputRecipe::Kind::Tuple;
  int items = tuple ? static_cast<int>(pack->items.size()) : 0;
  int first_item = program.slot_count;
  slots.result_slot = pack != nullptr ? first_item + items : -1;
  slots.ref_slots = first_item + items + (pack != nullptr ? 1 : 0);
  slots.frame_slot = slots.ref_slots;
  program.slot_count = slots.frame_slot + 1;

  int zero = program.constant(0);
  int frame = run.graph->lower_run_begin(program, slots.frame_slot, fail_code);
  int bind = program.add_helper("bind_input", 3, reinterpret_cast<const void*>(&glue_bind_input));
  for (size_t i = 0; i < run.input_sources.size(); ++i) {
    int source = run.input_sources[i];
    int object = source >= 0 ? source_value(source, fail_code)
                             : program.constant_address(run.captured.at(i));
    program.check_eq(program.call(bind, {frame, program.constant(static_cast<int64_t>(i)), object}),
                     zero, fail_code);
  }
  run.graph->lower_run_steps(program, frame, fail_code);
  if (pack == nullptr) return slots;

  int wrap = program.add_helper("wrap_output", 2, reinterpret_cast<const void*>(&glue_wrap_output));
  auto packed_item = [&](const vm::OutputRecipe& r, int64_t slot) {
    int value;
    if (r.kind == vm::OutputRecipe::Kind::GraphOutput) {
      value = program.call(wrap, {frame, program.constant(r.index)});
    } else {
      int new_ref = program.add_helper("new_ref", 1, reinterpret_cast<const void*>(&glue_new_ref));
      value = program.call(new_ref, {program.constant_address(r.constant.get())});
    }
    program.store(slot, value);
    program.check_nonzero(value, fail_code);
  };
  if (!tuple) {
    packed_item(*pack, slots.result_slot);
    return slots;
  }
  for (int i = 0; i < items; ++i) packed_item(pack->items[static_cast<size_t>(i)], first_item + i);
  int make = program.add_helper("pack_tuple", 2, reinterpret_cast<const void*>(&glue_pack_tuple));
  int result = program.call(make, {program.constant(items), program.slot_address(first_item)});
  program.store(slots.result_slot, result);
  program.check_nonzero(result, fail_code);
  return slots;
}

}  // namespace dynvm::runtime
