// One run of the eager backend's plan: the arena lease, and every kind of step as the
// executor's loop and the glue run it.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <utility>

#include "executor/aten_layout.h"
#include "executor/aten_plan.h"

namespace dynvm::codegen::exec {

namespace {

c10::Storage allocate_arena(AtenExecutor::ArenaCache& cache, int64_t bytes) {
  // Not resizable: an operator resizing a view of it fails instead of moving the arena.
  c10::Storage arena(c10::Storage::use_byte_size_t(), bytes, c10::GetDefaultCPUAllocator(),
                     /*resizable=*/false);
  cache.allocations.fetch_add(1, std::memory_order_relaxed);
  return arena;
}

}  // namespace

ArenaLease::ArenaLease(AtenExecutor::ArenaCache& cache, int64_t bytes) : cache_(cache) {
  bool expected = false;
  if (cache.busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    holds_cache_ = true;
    if (!cache.cached) {
      try {
        cache.cached = allocate_arena(cache, bytes);
      } catch (...) {
        cache.busy.store(false, std::memory_order_release);
        throw;
      }
    }
  } else {
    own_ = allocate_arena(cache, bytes);
  }
}

ArenaLease::~ArenaLease() {
  if (!holds_cache_) return;
  if (cache_.cached.use_count() != 1) cache_.cached = c10::Storage();
  cache_.busy.store(false, std::memory_order_release);
}

// A tensor over `arena` laid out as `placement` says.
at::Tensor arena_view(const c10::Storage& arena, const Placement& placement) {
  caffe2::TypeMeta type = c10::scalarTypeToTypeMeta(placement.dtype);
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(arena), c10::DispatchKeySet(c10::DispatchKey::CPU), type);
  view.unsafeGetTensorImpl()->set_sizes_and_strides(
      c10::IntArrayRef(placement.sizes), c10::IntArrayRef(placement.strides),
      placement.offset / static_cast<int64_t>(type.itemsize()));
  return view;
}

at::Tensor placed_output(const RunState& state, const Placement& placement) {
  if (placement.input_slot >= 0) {
    return state.slots[static_cast<size_t>(placement.input_slot)].toTensor();
  }
  if (placement.offset >= 0 && state.arena) return arena_view(state.arena->storage(), placement);
  return at::empty_strided(placement.sizes, placement.strides,
                           at::TensorOptions().dtype(placement.dtype).device(placement.device));
}

namespace {

bool shares_storage(const c10::IValue& value, const c10::Storage& arena) {
  return value.isTensor() && value.toTensor().defined() && value.toTensor().has_storage() &&
         value.toTensor().storage().is_alias_of(arena);
}

// A result the plan took for fresh that is a view of the arena after all (an operator
// returning its input in some cases): copied, so that the arena's slots stay the plan's.
void unshare(c10::IValue& value, const c10::Storage& arena) {
  if (shares_storage(value, arena)) {
    value = value.toTensor().clone();
  } else if (value.isTensorList()) {
    c10::List<at::Tensor> list = value.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue item(list.get(i));
      if (shares_storage(item, arena)) list.set(i, item.toTensor().clone());
    }
  }
}

}  // namespace

at::Tensor KeptClone::get(const at::Tensor& source) {
  if (c10::GradMode::is_enabled() && source.requires_grad()) return source.clone(format_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (converted_.defined() && source.unsafeGetTensorImpl() == source_._unsafe_get_target() &&
      source.const_data_ptr() == data_ && static_cast<int64_t>(source._version()) == version_) {
    return converted_;
  }
  {
    c10::AutoGradMode no_grad(false);
    converted_ = source.clone(format_);
  }
  source_ =
      c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(source.getIntrusivePtr());
  data_ = source.const_data_ptr();
  version_ = static_cast<int64_t>(source._version());
  return converted_;
}

RunState::RunState(const AtenExecutor::Plan& of, AtenExecutor::ArenaCache& arenas)
    : plan(of), slots(of.num_slots) {
  if (of.arena_bytes > 0) arena.emplace(arenas, of.arena_bytes);
  stack.reserve(of.max_stack);
}

void release_last_uses(RunState& state, const Step& step) {
  for (uint32_t r = step.releases_begin; r < step.releases_end; ++r) {
    state.slots[static_cast<size_t>(state.plan.releases[r])] = c10::IValue();
  }
}

void run_step(RunState& state, const Step& step) {
  const AtenExecutor::Plan& plan = state.plan;
  const ListItem* items = plan.list_items.data();
  if (step.group >= 0) {
    std::vector<at::Tensor> group_inputs;
    group_inputs.reserve(step.args_end - step.args_begin);
    for (uint32_t a = step.args_begin; a < step.args_end; ++a) {
      group_inputs.push_back(state.slots[static_cast<size_t>(plan.arguments[a].slot)].toTensor());
    }
    uint32_t num_outputs = step.outputs_end - step.outputs_begin;
    std::vector<at::Tensor> group_outputs;
    if (step.placements_begin >= 0) {
      group_outputs.reserve(num_outputs);
      for (uint32_t i = 0; i < num_outputs; ++i) {
        const Placement& p = plan.placements[static_cast<size_t>(step.placements_begin) + i];
        group_outputs.push_back(placed_output(state, p));
      }
      plan.groups_into[static_cast<size_t>(step.group)](group_inputs, group_outputs);
    } else {
      group_outputs = plan.groups[static_cast<size_t>(step.group)](group_inputs);
    }
    TORCH_CHECK(group_outputs.size() == num_outputs, "fused group ", step.group, " returned ",
                group_outputs.size(), " tensors where the graph expects ", num_outputs);
    for (uint32_t i = 0; i < num_outputs; ++i) {
      state.slots[static_cast<size_t>(plan.output_slots[step.outputs_begin + i])] =
          std::move(group_outputs[i]);
    }
    release_last_uses(state, step);
    return;
  }
  if (step.kept_clone >= 0) {
    const at::Tensor& source =
        state.slots[static_cast<size_t>(plan.arguments[step.args_begin].slot)].toTensor();
    state.slots[static_cast<size_t>(plan.output_slots[step.outputs_begin])] =
        plan.kept_clones[static_cast<size_t>(step.kept_clone)]->get(source);
    release_last_uses(state, step);
    return;
  }
  if (!step.op) {
    c10::GradMode::set_enabled(step.grad_enabled);
    return;
  }
  state.stack.clear();
  for (uint32_t a = step.args_begin; a < step.args_end; ++a) {
    const ArgumentSource& source = plan.arguments[a];
    switch (source.kind) {
      case SourceKind::kLiteral:
        state.stack.push_back(source.literal);
        break;
      case SourceKind::kSlot:
        state.stack.push_back(state.slots[static_cast<size_t>(source.slot)]);
        break;
      case SourceKind::kTensorList: {
        c10::List<at::Tensor> list;
        list.reserve(source.items_end - source.items_begin);
        for (uint32_t i = source.items_begin; i < source.items_end; ++i) {
          list.push_back(state.slots[static_cast<size_t>(items[i].slot)].toTensor());
        }
        state.stack.emplace_back(std::move(list));
        break;
      }
      case SourceKind::kOptionalTensorList: {
        c10::List<c10::optional<at::Tensor>> list;
        list.reserve(source.items_end - source.items_begin);
        for (uint32_t i = source.items_begin; i < source.items_end; ++i) {
          if (items[i].slot < 0) {
            list.push_back(c10::nullopt);
          } else {
            list.push_back(state.slots[static_cast<size_t>(items[i].slot)].toTensor());
          }
        }
        state.stack.emplace_back(std::move(list));
        break;
      }
      case SourceKind::kIntList: {
        c10::List<int64_t> list;
        list.reserve(source.items_end - source.items_begin);
        for (uint32_t i = source.items_begin; i < source.items_end; ++i) {
          list.push_back(items[i].slot < 0
                             ? items[i].literal
                             : state.slots[static_cast<size_t>(items[i].slot)].toInt());
        }
        state.stack.emplace_back(std::move(list));
        break;
      }
    }
  }
  step.op->callBoxed(&state.stack);
  if (step.layouts_begin >= 0) {
    size_t outputs = std::min<size_t>(state.stack.size(), step.outputs_end - step.outputs_begin);
    for (size_t i = 0; i < outputs; ++i) {
      const std::optional<graph::TensorMeta>& recorded =
          plan.result_layouts[static_cast<size_t>(step.layouts_begin) + i];
      if (recorded && state.stack[i].isTensor()) {
        state.stack[i] = in_layout(state.stack[i].toTensor(), *recorded);
      }
    }
  }
  if (step.fresh_results && state.arena) {
    for (c10::IValue& result : state.stack) unshare(result, state.arena->storage());
  }

  uint32_t num_outputs = step.outputs_end - step.outputs_begin;
  if (step.spread_list) {
    c10::List<at::Tensor> list = std::move(state.stack[0]).toTensorList();
    TORCH_CHECK(list.size() == num_outputs, step.op->schema().name(), " returned ", list.size(),
                " tensors where the graph expects ", num_outputs);
    for (uint32_t i = 0; i < num_outputs; ++i) {
      int32_t slot = plan.output_slots[step.outputs_begin + i];
      if (slot >= 0) state.slots[static_cast<size_t>(slot)] = list.get(i);
    }
  } else {
    for (uint32_t i = 0; i < num_outputs; ++i) {
      int32_t slot = plan.output_slots[step.outputs_begin + i];
      if (slot >= 0) state.slots[static_cast<size_t>(slot)] = std::move(state.stack[i]);
    }
  }
  release_last_uses(state, step);
}

}  // namespace dynvm::codegen::exec

namespace dynvm::codegen {

bool inputs_overlap(const std::vector<at::Tensor>& inputs, const std::vector<size_t>& mutated) {
  for (size_t m : mutated) {
    if (m >= inputs.size() || !inputs[m].defined() || !inputs[m].has_storage()) continue;
    const c10::Storage& storage = inputs[m].storage();
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (j != m && inputs[j].defined() && inputs[j].has_storage() &&
          inputs[j].storage().is_alias_of(storage)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace dynvm::codegen
