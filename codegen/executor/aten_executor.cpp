// The eager backend: a per-node plan of resolved operators and prebuilt arguments, built once
// from the graph and replayed through ATen's boxed dispatcher on every call; fused groups
// write their planned outputs into an arena kept across runs.
#include "dynvm/codegen/aten_executor.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/in_place_outputs.h"
#include "dynvm/graph/memory_planning.h"
#include "dynvm/graph/op_properties.h"
#include "dynvm/graph/value_names.h"
#include "executor/aten_dtype.h"
#include "executor/aten_plan.h"

namespace dynvm::codegen {

namespace {
constexpr std::string_view kFusedGroupOp = "dynvm::fused";  // graph::kFusedOp
}  // namespace

using exec::ArgumentSource;
using exec::ListItem;
using exec::Placement;
using exec::SourceKind;
using exec::Step;

namespace {

using graph::Argument;
using graph::ValueKind;

c10::MemoryFormat to_memory_format(graph::MemoryFormat format) {
  switch (format) {
    case graph::MemoryFormat::Contiguous:
      return c10::MemoryFormat::Contiguous;
    case graph::MemoryFormat::Preserve:
      return c10::MemoryFormat::Preserve;
    case graph::MemoryFormat::ChannelsLast:
      return c10::MemoryFormat::ChannelsLast;
    case graph::MemoryFormat::ChannelsLast3d:
      return c10::MemoryFormat::ChannelsLast3d;
  }
  return c10::MemoryFormat::Contiguous;
}

c10::Layout to_layout(graph::Layout layout) {
  switch (layout) {
    case graph::Layout::Strided:
      return c10::kStrided;
    case graph::Layout::SparseCoo:
      return c10::kSparse;
    case graph::Layout::SparseCsr:
      return c10::kSparseCsr;
    case graph::Layout::SparseCsc:
      return c10::kSparseCsc;
    case graph::Layout::SparseBsr:
      return c10::kSparseBsr;
    case graph::Layout::SparseBsc:
      return c10::kSparseBsc;
    case graph::Layout::Mkldnn:
      return c10::kMkldnn;
  }
  return c10::kStrided;
}

c10::Device to_device(graph::Device device) {
  c10::DeviceType type = c10::DeviceType::CPU;
  switch (device.type) {
    case graph::DeviceType::Cpu:
      type = c10::DeviceType::CPU;
      break;
    case graph::DeviceType::Cuda:
      type = c10::DeviceType::CUDA;
      break;
    case graph::DeviceType::Meta:
      type = c10::DeviceType::Meta;
      break;
  }
  return c10::Device(type, static_cast<c10::DeviceIndex>(device.index));
}

bool is_int_type(c10::TypeKind kind) {
  return kind == c10::TypeKind::IntType || kind == c10::TypeKind::SymIntType;
}

// Whether a node output of `kind` can hold what a schema return of `type` gives.
bool output_kind_matches(const c10::Type& type, ValueKind kind) {
  switch (type.kind()) {
    case c10::TypeKind::TensorType:
      return kind == ValueKind::Tensor;
    case c10::TypeKind::ListType:
      return kind == ValueKind::TensorList &&
             type.expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return kind == ValueKind::Int;
    case c10::TypeKind::FloatType:
      return kind == ValueKind::Float;
    case c10::TypeKind::BoolType:
      return kind == ValueKind::Bool;
    case c10::TypeKind::NumberType:
      return kind == ValueKind::Int || kind == ValueKind::Float || kind == ValueKind::Bool;
    default:
      return false;
  }
}

// Splits "aten::add.Tensor" into the operator name "aten::add" and the overload "Tensor".
c10::OperatorName operator_name(const std::string& op) {
  size_t colons = op.find("::");
  size_t dot = op.find('.', colons == std::string::npos ? 0 : colons + 2);
  if (dot == std::string::npos) return c10::OperatorName(op, "");
  return c10::OperatorName(op.substr(0, dot), op.substr(dot + 1));
}

}  // namespace

namespace {

// Builds a Plan from a graph; the first problem found becomes the Error.
class PlanBuilder {
 public:
  explicit PlanBuilder(const graph::Graph& graph) : graph_(graph), names_(graph) {}

  Expected<std::unique_ptr<AtenExecutor::Plan>> build(
      std::vector<AtenExecutor::GroupRunner> groups = {},
      std::vector<AtenExecutor::GroupIntoRunner> groups_into = {},
      const graph::MemoryPlan* memory = nullptr) {
    plan_ = std::make_unique<AtenExecutor::Plan>();
    plan_->groups = std::move(groups);
    plan_->groups_into = std::move(groups_into);
    slot_of_.assign(graph_.num_values(), -1);
    last_use_.assign(graph_.num_values(), kUnused);
    if (memory != nullptr) index_memory_plan(*memory);

    for (graph::Value* input : graph_.inputs()) {
      if (input->kind() != ValueKind::Tensor) {
        return make_error("graph input " + names_(input) + " is a " + to_text(input->type()) +
                          "; the eager backend takes tensor inputs only");
      }
      slot_of_[input->id()] = new_slot();
    }
    int32_t index = 0;
    for (const graph::Node* node : graph_.nodes()) {
      node_ = node;
      if (!add_step(index++)) return *error_;
    }
    node_ = nullptr;
    for (graph::Value* output : graph_.outputs()) {
      int32_t slot = slot_of_[output->id()];
      if (slot < 0) {
        return make_error("graph output " + names_(output) + " is not defined by a live node");
      }
      if (output->kind() != ValueKind::Tensor) {
        return make_error("graph output " + names_(output) + " is a " + to_text(output->type()) +
                          "; the eager backend returns tensors only");
      }
      last_use_[output->id()] = kGraphOutput;
      plan_->graph_output_slots.push_back(slot);
    }
    plan_release_points();
    plan_->num_slots = static_cast<size_t>(next_slot_);
    return std::move(plan_);
  }

 private:
  static constexpr int32_t kUnused = -1;
  static constexpr int32_t kGraphOutput = -2;

  int32_t new_slot() { return next_slot_++; }

  bool fail(const std::string& why) {
    if (!error_) {
      std::string where = node_ ? "node `" + to_text(*node_, names_) + "`" : "the graph";
      error_ = make_error("eager backend cannot run " + where + ": " + why);
    }
    return false;
  }

  bool add_step(int32_t index) {
    Step step;
    step.args_begin = static_cast<uint32_t>(plan_->arguments.size());
    step.outputs_begin = static_cast<uint32_t>(plan_->output_slots.size());
    bool ok = node_->op() == graph::kSetGradEnabledOp ? add_grad_mode_switch(step)
              : node_->op() == kFusedGroupOp          ? add_group_call(step, index)
              : node_->op() == graph::kKeptCloneOp    ? add_kept_clone(step, index)
                                                      : add_operator_call(step, index);
    if (!ok) return false;
    step.args_end = static_cast<uint32_t>(plan_->arguments.size());
    step.outputs_end = static_cast<uint32_t>(plan_->output_slots.size());
    plan_->steps.push_back(std::move(step));
    return true;
  }

  bool add_grad_mode_switch(Step& step) {
    const std::vector<Argument>& args = node_->args();
    if (args.size() != 1 || !node_->kwargs().empty() || args[0].kind() != Argument::Kind::Bool) {
      return fail(std::string(graph::kSetGradEnabledOp) + " takes one literal bool");
    }
    if (node_->num_outputs() != 0)
      return fail(std::string(graph::kSetGradEnabledOp) + " has no outputs");
    step.grad_enabled = args[0].as_bool();
    return true;
  }

  bool add_kept_clone(Step& step, int32_t index) {
    const Argument* format = node_->kwarg("memory_format");
    if (node_->args().size() != 1 || !node_->arg(0).is_value() ||
        node_->arg(0).as_value()->kind() != ValueKind::Tensor || node_->num_outputs() != 1 ||
        format == nullptr || format->kind() != Argument::Kind::MemoryFormat) {
      return fail(std::string(graph::kKeptCloneOp) + " takes one tensor and a memory_format");
    }
    ArgumentSource source;
    source.kind = SourceKind::kSlot;
    source.slot = slot_of_[node_->arg(0).as_value()->id()];
    if (source.slot < 0) return fail("reads an undefined value");
    plan_->arguments.push_back(std::move(source));
    last_use_[node_->arg(0).as_value()->id()] = index;
    int32_t slot = new_slot();
    slot_of_[node_->output()->id()] = slot;
    plan_->output_slots.push_back(slot);
    step.kept_clone = static_cast<int32_t>(plan_->kept_clones.size());
    plan_->kept_clones.push_back(
        std::make_shared<exec::KeptClone>(to_memory_format(format->as_memory_format())));
    return true;
  }

  bool add_group_call(Step& step, int32_t index) {
    const graph::Argument* group = node_->kwarg("group");
    if (group == nullptr || group->kind() != Argument::Kind::Int || group->as_int() < 0 ||
        static_cast<size_t>(group->as_int()) >= plan_->groups.size() ||
        !plan_->groups[static_cast<size_t>(group->as_int())]) {
      return fail("a fused group without a runner");
    }
    step.group = static_cast<int32_t>(group->as_int());
    for (const Argument& arg : node_->args()) {
      if (arg.kind() != Argument::Kind::Value || arg.as_value()->kind() != ValueKind::Tensor) {
        return fail("a fused group's arguments must be tensors");
      }
      ArgumentSource source;
      source.kind = SourceKind::kSlot;
      source.slot = slot_of_[arg.as_value()->id()];
      if (source.slot < 0) return fail("a fused group reads an undefined value");
      plan_->arguments.push_back(std::move(source));
    }
    for (const graph::Value* used : node_->input_values()) last_use_[used->id()] = index;
    for (graph::Value* out : node_->outputs()) {
      int32_t slot = new_slot();
      slot_of_[out->id()] = slot;
      plan_->output_slots.push_back(slot);
    }
    place_group_outputs(step);
    return true;
  }

  // --- planned memory
  void index_memory_plan(const graph::MemoryPlan& memory) {
    memory_ = &memory;
    assignment_of_.assign(graph_.num_values(), nullptr);
    for (const graph::BufferAssignment& b : memory.buffers) {
      if (b.value_id < assignment_of_.size()) assignment_of_[b.value_id] = &b;
    }
    for (const graph::Value* out : graph_.outputs()) assignment_of_[out->id()] = nullptr;
    slot_offset_.assign(memory.slots.size(), -1);
  }

  // Bytes the elements of `meta` span (0 when it has none), or -1 for negative strides.
  static int64_t extent_bytes(const graph::TensorMeta& meta) {
    int64_t extent = 1;
    for (size_t d = 0; d < meta.dim(); ++d) {
      if (meta.sizes[d] == 0) return 0;
      if (meta.strides[d] < 0) return -1;
      extent += (meta.sizes[d] - 1) * meta.strides[d];
    }
    return extent * graph::dtype_itemsize(meta.dtype);
  }

  // The arena offset of `out`'s planned buffer, or -1 when it is allocated per run.
  int64_t planned_offset(const graph::Value& out) {
    const graph::BufferAssignment* assigned = assignment_of_[out.id()];
    const graph::TensorMeta* meta = out.meta();
    if (assigned == nullptr || meta == nullptr || meta->device.type != graph::DeviceType::Cpu ||
        assigned->slot >= memory_->slots.size()) {
      return -1;
    }
    const graph::BufferSlot& slot = memory_->slots[assigned->slot];
    int64_t bytes = extent_bytes(*meta);
    if (bytes <= 0 || bytes > assigned->bytes || assigned->bytes > slot.bytes ||
        slot.device.type != graph::DeviceType::Cpu) {
      return -1;
    }
    int64_t& offset = slot_offset_[assigned->slot];
    if (offset < 0) {
      // Slots are laid out in order of first use, each 64-byte aligned.
      offset = (plan_->arena_bytes + 63) / 64 * 64;
      plan_->arena_bytes = offset + slot.bytes;
    }
    return offset;
  }

  void place_group_outputs(Step& step) {
    size_t group = static_cast<size_t>(step.group);
    if (memory_ == nullptr || group >= plan_->groups_into.size() || !plan_->groups_into[group]) {
      return;
    }
    size_t begin = plan_->placements.size();
    size_t placed = 0;
    size_t in_arena = 0;
    for (const graph::Value* out : node_->outputs()) {
      Placement placement;
      const graph::TensorMeta* meta = out->meta();
      if (meta == nullptr) {  // not a tensor the executor can allocate: no into call
        plan_->placements.resize(begin);
        return;
      }
      if (std::optional<size_t> into = graph::in_place_target(*node_, out->output_index())) {
        placement.input_slot = plan_->arguments[step.args_begin + *into].slot;
      } else {
        placement.offset = planned_offset(*out);
      }
      placement.dtype = to_scalar_type(meta->dtype);
      placement.device = to_device(meta->device);
      placement.sizes = meta->sizes;
      placement.strides = meta->strides;
      if (placement.offset >= 0) ++in_arena;
      if (placement.offset >= 0 || placement.input_slot >= 0) ++placed;
      plan_->placements.push_back(std::move(placement));
    }
    if (placed == 0) {
      plan_->placements.resize(begin);
      return;
    }
    step.placements_begin = static_cast<int32_t>(begin);
    plan_->planned_outputs += in_arena;
  }

  bool add_operator_call(Step& step, int32_t index) {
    c10::OperatorName name = operator_name(node_->op());
    std::optional<c10::OperatorHandle> op;
    if (auto found = c10::Dispatcher::singleton().findSchema(name)) op = *found;
    if (!op) return fail("unknown operator " + node_->op());
    const c10::FunctionSchema& schema = op->schema();
    if (schema.is_vararg()) return fail("operators taking varargs are not supported");
    const std::vector<c10::Argument>& params = schema.arguments();
    size_t num_positional = 0;
    while (num_positional < params.size() && !params[num_positional].kwarg_only()) {
      ++num_positional;
    }
    const std::vector<Argument>& args = node_->args();
    if (args.size() > num_positional) {
      return fail(node_->op() + " takes " + std::to_string(num_positional) +
                  " positional argument(s), the node gives " + std::to_string(args.size()));
    }
    for (const graph::KeywordArgument& kwarg : node_->kwargs()) {
      auto it = std::find_if(params.begin(), params.end(),
                             [&](const c10::Argument& p) { return p.name() == kwarg.name; });
      if (it == params.end()) {
        return fail(node_->op() + " has no argument named '" + kwarg.name + "'");
      }
      if (static_cast<size_t>(it - params.begin()) < args.size()) {
        return fail("argument '" + kwarg.name + "' is given both by position and by keyword");
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const c10::Argument& param = params[i];
      const Argument* given = i < args.size() ? &args[i] : node_->kwarg(param.name());
      ArgumentSource source;
      if (given) {
        if (!convert(*given, *param.real_type(), param.N(), source, param.name())) return false;
      } else if (param.default_value()) {
        source.literal = *param.default_value();
      } else {
        return fail("argument '" + param.name() + "' of " + node_->op() + " is missing");
      }
      plan_->arguments.push_back(std::move(source));
    }
    for (const graph::Value* used : node_->input_values()) last_use_[used->id()] = index;
    if (!plan_outputs(step, schema)) return false;
    step.op = std::move(op);
    step.fresh_results = memory_ != nullptr &&
                         graph::default_output_storage(*node_) == graph::OutputStorage::Planned;
    // A result whose layout the kernel picks at run time (attention, convolution,
    // pooling): delivered in the layout the graph records, which the passes may have
    // chosen (the attention rewrite's row-major result, channels-last convolutions) and
    // which kernels reading it were compiled for.
    if (graph::op_properties(node_->op()).run_time_layout) {
      step.layouts_begin = static_cast<int32_t>(plan_->result_layouts.size());
      for (const graph::Value* out : node_->outputs()) {
        plan_->result_layouts.push_back(
            out->meta() != nullptr ? std::optional<graph::TensorMeta>(*out->meta()) : std::nullopt);
      }
    }
    plan_->max_stack = std::max({plan_->max_stack, params.size(), schema.returns().size()});
    return true;
  }

  bool plan_outputs(Step& step, const c10::FunctionSchema& schema) {
    const std::vector<c10::Argument>& returns = schema.returns();
    const std::vector<graph::Value*>& outputs = node_->outputs();
    bool returns_tensor_list =
        returns.size() == 1 && returns[0].real_type()->kind() == c10::TypeKind::ListType &&
        returns[0].real_type()->expectRef<c10::ListType>().getElementType()->kind() ==
            c10::TypeKind::TensorType;
    step.spread_list = returns_tensor_list &&
                       !(outputs.size() == 1 && outputs[0]->kind() == ValueKind::TensorList);
    for (size_t i = 0; i < outputs.size(); ++i) {
      graph::Value* out = outputs[i];
      if (step.spread_list) {
        if (out->kind() != ValueKind::Tensor) {
          return fail("output " + names_(out) + " of a Tensor[] spread into outputs must be a " +
                      "Tensor, not " + to_text(out->type()));
        }
      } else if (i >= returns.size()) {
        return fail("the node has " + std::to_string(outputs.size()) + " outputs, " + node_->op() +
                    " returns " + std::to_string(returns.size()));
      } else if (!output_kind_matches(*returns[i].real_type(), out->kind())) {
        return fail("output " + names_(out) + " is a " + to_text(out->type()) + ", " + node_->op() +
                    " returns " + returns[i].real_type()->str() + " there");
      }
      int32_t slot = new_slot();
      slot_of_[out->id()] = slot;
      plan_->output_slots.push_back(slot);
    }
    return true;
  }

  // --- converting one argument to what the schema type takes
  bool cannot_take(const Argument& arg, const c10::Type& type, const std::string& param) {
    return fail("argument '" + param + "' (" + type.str() + ") cannot take " +
                to_text(arg, names_));
  }

  // A graph value read as-is; `expected` lists the value kinds the schema type accepts.
  bool value_slot(const Argument& arg, std::initializer_list<ValueKind> expected,
                  const c10::Type& type, const std::string& param, ArgumentSource& out) {
    const graph::Value* value = arg.as_value();
    if (std::find(expected.begin(), expected.end(), value->kind()) == expected.end()) {
      return cannot_take(arg, type, param);
    }
    int32_t slot = slot_of_[value->id()];
    if (slot < 0) return fail(names_(value) + " is used before it is defined");
    out.kind = SourceKind::kSlot;
    out.slot = slot;
    return true;
  }

  bool convert(const Argument& arg, const c10::Type& type, c10::optional<int32_t> list_size,
               ArgumentSource& out, const std::string& param) {
    using Kind = Argument::Kind;
    Kind kind = arg.kind();
    switch (type.kind()) {
      case c10::TypeKind::OptionalType:
        if (kind == Kind::None) {
          out.literal = c10::IValue();
          return true;
        }
        return convert(arg, *type.expectRef<c10::OptionalType>().getElementType(), list_size, out,
                       param);
      case c10::TypeKind::TensorType:
        if (kind == Kind::Value) return value_slot(arg, {ValueKind::Tensor}, type, param, out);
        if (kind == Kind::None) {
          // An undefined tensor, as autograd passes one where a backward's schema takes a
          // plain Tensor (efficient attention's bias when the forward had none).
          out.literal = c10::IValue(at::Tensor());
          return true;
        }
        if (kind == Kind::Int || kind == Kind::Double || kind == Kind::Bool) {
          // A Python number where the schema takes a tensor (x * 2): eager passes it as a
          // 0-d "wrapped number" tensor, which type promotion treats like a scalar.
          c10::Scalar s = kind == Kind::Int      ? c10::Scalar(arg.as_int())
                          : kind == Kind::Double ? c10::Scalar(arg.as_double())
                                                 : c10::Scalar(arg.as_bool());
          at::Tensor wrapped = c10::scalar_to_tensor(s);
          wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
          out.literal = c10::IValue(std::move(wrapped));
          return true;
        }
        break;
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
        // Schemas may spell dtype/layout/memory-format arguments as int: ATen's own encoding.
        if (kind == Kind::Int) {
          out.literal = c10::IValue(arg.as_int());
        } else if (kind == Kind::DType) {
          out.literal = c10::IValue(static_cast<int64_t>(to_scalar_type(arg.as_dtype())));
        } else if (kind == Kind::Layout) {
          out.literal = c10::IValue(static_cast<int64_t>(to_layout(arg.as_layout())));
        } else if (kind == Kind::MemoryFormat) {
          out.literal = c10::IValue(static_cast<int64_t>(to_memory_format(arg.as_memory_format())));
        } else if (kind == Kind::Value) {
          return value_slot(arg, {ValueKind::Int}, type, param, out);
        } else {
          break;
        }
        return true;
      case c10::TypeKind::FloatType:
        if (kind == Kind::Double || kind == Kind::Int) {
          out.literal =
              c10::IValue(kind == Kind::Int ? static_cast<double>(arg.as_int()) : arg.as_double());
          return true;
        }
        if (kind == Kind::Value) return value_slot(arg, {ValueKind::Float}, type, param, out);
        break;
      case c10::TypeKind::BoolType:
        if (kind == Kind::Bool) {
          out.literal = c10::IValue(arg.as_bool());
          return true;
        }
        if (kind == Kind::Value) return value_slot(arg, {ValueKind::Bool}, type, param, out);
        break;
      case c10::TypeKind::NumberType:  // Scalar
        if (kind == Kind::Int) {
          out.literal = c10::IValue(arg.as_int());
        } else if (kind == Kind::Double) {
          out.literal = c10::IValue(arg.as_double());
        } else if (kind == Kind::Bool) {
          out.literal = c10::IValue(arg.as_bool());
        } else if (kind == Kind::Value) {
          return value_slot(arg, {ValueKind::Int, ValueKind::Float, ValueKind::Bool}, type, param,
                            out);
        } else {
          break;
        }
        return true;
      case c10::TypeKind::StringType:
        if (kind == Kind::String) {
          out.literal = c10::IValue(arg.as_string());
          return true;
        }
        break;
      case c10::TypeKind::ScalarTypeType:
        if (kind == Kind::DType) {
          out.literal = c10::IValue(to_scalar_type(arg.as_dtype()));
          return true;
        }
        break;
      case c10::TypeKind::LayoutType:
        if (kind == Kind::Layout) {
          out.literal = c10::IValue(to_layout(arg.as_layout()));
          return true;
        }
        break;
      case c10::TypeKind::MemoryFormatType:
        if (kind == Kind::MemoryFormat) {
          out.literal = c10::IValue(to_memory_format(arg.as_memory_format()));
          return true;
        }
        break;
      case c10::TypeKind::DeviceObjType:
        if (kind == Kind::Device) {
          out.literal = c10::IValue(to_device(arg.as_device()));
          return true;
        }
        break;
      case c10::TypeKind::ListType:
        return convert_list(arg, type, list_size, out, param);
      default:
        return fail("argument '" + param + "' has type " + type.str() +
                    ", which the eager backend does not support");
    }
    return cannot_take(arg, type, param);
  }

  // int[N] and bool[N] take a single item for all N, as Python's argument parser does.
  static std::vector<Argument> list_items(const Argument& arg, c10::optional<int32_t> list_size) {
    if (arg.is_list()) return arg.as_list();
    return std::vector<Argument>(list_size ? static_cast<size_t>(*list_size) : 1, arg);
  }

  bool convert_list(const Argument& arg, const c10::Type& type, c10::optional<int32_t> list_size,
                    ArgumentSource& out, const std::string& param) {
    using Kind = Argument::Kind;
    const c10::Type& element = *type.expectRef<c10::ListType>().getElementType();
    c10::TypeKind element_kind = element.kind();

    if (element_kind == c10::TypeKind::TensorType) {
      if (arg.is_value()) return value_slot(arg, {ValueKind::TensorList}, type, param, out);
      if (!arg.is_list()) return cannot_take(arg, type, param);
      out.kind = SourceKind::kTensorList;
      return add_list_items(arg, type, param, out, /*allow_none=*/false, ValueKind::Tensor);
    }
    if (element_kind == c10::TypeKind::OptionalType &&
        element.expectRef<c10::OptionalType>().getElementType()->kind() ==
            c10::TypeKind::TensorType) {
      if (!arg.is_list()) return cannot_take(arg, type, param);
      out.kind = SourceKind::kOptionalTensorList;
      return add_list_items(arg, type, param, out, /*allow_none=*/true, ValueKind::Tensor);
    }
    if (arg.is_value()) return cannot_take(arg, type, param);
    std::vector<Argument> items = list_items(arg, list_size);

    if (is_int_type(element_kind)) {
      bool has_values = std::any_of(items.begin(), items.end(),
                                    [](const Argument& item) { return item.is_value(); });
      if (has_values) {
        out.kind = SourceKind::kIntList;
        return add_list_items(Argument::list(items), type, param, out, /*allow_none=*/false,
                              ValueKind::Int);
      }
      c10::List<int64_t> list;
      list.reserve(items.size());
      for (const Argument& item : items) {
        if (item.kind() != Kind::Int) return cannot_take(arg, type, param);
        list.push_back(item.as_int());
      }
      out.literal = c10::IValue(std::move(list));
      return true;
    }
    if (element_kind == c10::TypeKind::FloatType) {
      c10::List<double> list;
      list.reserve(items.size());
      for (const Argument& item : items) {
        if (item.kind() == Kind::Double) {
          list.push_back(item.as_double());
        } else if (item.kind() == Kind::Int) {
          list.push_back(static_cast<double>(item.as_int()));
        } else {
          return cannot_take(arg, type, param);
        }
      }
      out.literal = c10::IValue(std::move(list));
      return true;
    }
    if (element_kind == c10::TypeKind::BoolType) {
      c10::List<bool> list;
      list.reserve(items.size());
      for (const Argument& item : items) {
        if (item.kind() != Kind::Bool) return cannot_take(arg, type, param);
        list.push_back(item.as_bool());
      }
      out.literal = c10::IValue(std::move(list));
      return true;
    }
    if (element_kind == c10::TypeKind::StringType) {
      c10::List<std::string> list;
      list.reserve(items.size());
      for (const Argument& item : items) {
        if (item.kind() != Kind::String) return cannot_take(arg, type, param);
        list.push_back(item.as_string());
      }
      out.literal = c10::IValue(std::move(list));
      return true;
    }
    if (element_kind == c10::TypeKind::NumberType) {  // Scalar[]
      c10::impl::GenericList list(c10::NumberType::get());
      list.reserve(items.size());
      for (const Argument& item : items) {
        if (item.kind() == Kind::Int) {
          list.push_back(c10::IValue(item.as_int()));
        } else if (item.kind() == Kind::Double) {
          list.push_back(c10::IValue(item.as_double()));
        } else if (item.kind() == Kind::Bool) {
          list.push_back(c10::IValue(item.as_bool()));
        } else {
          return cannot_take(arg, type, param);
        }
      }
      out.literal = c10::IValue(std::move(list));
      return true;
    }
    return fail("argument '" + param + "' has type " + type.str() +
                ", which the eager backend does not support");
  }

  // Items of a list assembled at run time: values of `value_kind`, literal ints for int
  // lists, None where `allow_none`.
  bool add_list_items(const Argument& arg, const c10::Type& type, const std::string& param,
                      ArgumentSource& out, bool allow_none, ValueKind value_kind) {
    out.items_begin = static_cast<uint32_t>(plan_->list_items.size());
    for (const Argument& item : arg.as_list()) {
      ListItem entry;
      if (item.is_value()) {
        const graph::Value* value = item.as_value();
        if (value->kind() != value_kind) return cannot_take(arg, type, param);
        entry.slot = slot_of_[value->id()];
        if (entry.slot < 0) return fail(names_(value) + " is used before it is defined");
      } else if (item.is_none() && allow_none) {
        entry.slot = -1;
      } else if (item.kind() == Argument::Kind::Int && value_kind == ValueKind::Int) {
        entry.literal = item.as_int();
      } else {
        return cannot_take(arg, type, param);
      }
      plan_->list_items.push_back(entry);
    }
    out.items_end = static_cast<uint32_t>(plan_->list_items.size());
    return true;
  }

  // --- liveness: every slot is dropped right after the step that reads it last
  void plan_release_points() {
    std::vector<std::vector<int32_t>> releases(plan_->steps.size());
    for (graph::Value* input : graph_.inputs()) {
      int32_t last = last_use_[input->id()];
      int32_t slot = slot_of_[input->id()];
      plan_->input_slots.push_back(last == kUnused ? -1 : slot);
      if (last >= 0) releases[static_cast<size_t>(last)].push_back(slot);
    }
    size_t step_index = 0;
    for (const graph::Node* node : graph_.nodes()) {
      Step& step = plan_->steps[step_index];
      for (size_t i = 0; i < node->num_outputs(); ++i) {
        const graph::Value* out = node->output(i);
        int32_t last = last_use_[out->id()];
        if (last == kUnused) {
          plan_->output_slots[step.outputs_begin + i] = -1;
        } else if (last >= 0) {
          releases[static_cast<size_t>(last)].push_back(slot_of_[out->id()]);
        }
      }
      ++step_index;
    }
    for (size_t i = 0; i < plan_->steps.size(); ++i) {
      Step& step = plan_->steps[i];
      step.releases_begin = static_cast<uint32_t>(plan_->releases.size());
      plan_->releases.insert(plan_->releases.end(), releases[i].begin(), releases[i].end());
      step.releases_end = static_cast<uint32_t>(plan_->releases.size());
    }
  }

  const graph::Graph& graph_;
  graph::ValueNames names_;
  std::unique_ptr<AtenExecutor::Plan> plan_;
  std::vector<int32_t> slot_of_;   // by value id
  std::vector<int32_t> last_use_;  // by value id: step index, kUnused or kGraphOutput
  int32_t next_slot_ = 0;
  const graph::Node* node_ = nullptr;  // the node being planned, for error messages
  std::optional<Error> error_;
  // Planned memory, when applied: each value's assignment (none for graph outputs) and
  // each plan slot's offset in the arena (-1 until a placed output uses it).
  const graph::MemoryPlan* memory_ = nullptr;
  std::vector<const graph::BufferAssignment*> assignment_of_;
  std::vector<int64_t> slot_offset_;
};

}  // namespace

AtenExecutor::AtenExecutor(std::unique_ptr<const Plan> plan)
    : plan_(std::move(plan)), arenas_(std::make_unique<ArenaCache>()) {}

AtenExecutor::~AtenExecutor() = default;

Expected<std::unique_ptr<AtenExecutor>> AtenExecutor::build(const graph::Graph& graph) {
  return build(graph, {});
}

Expected<std::unique_ptr<AtenExecutor>> AtenExecutor::build(const graph::Graph& graph,
                                                            std::vector<GroupRunner> groups) {
  return build_planned(graph, std::move(groups), {}, nullptr);
}

Expected<std::unique_ptr<AtenExecutor>> AtenExecutor::build(
    const graph::Graph& graph, std::vector<GroupRunner> groups,
    std::vector<GroupIntoRunner> groups_into, const graph::MemoryPlan& memory) {
  return build_planned(graph, std::move(groups), std::move(groups_into), &memory);
}

Expected<std::unique_ptr<AtenExecutor>> AtenExecutor::build_planned(
    const graph::Graph& graph, std::vector<GroupRunner> groups,
    std::vector<GroupIntoRunner> groups_into, const graph::MemoryPlan* memory) {
  try {
    Expected<std::unique_ptr<Plan>> plan =
        PlanBuilder(graph).build(std::move(groups), std::move(groups_into), memory);
    if (!plan) return plan.error();
    return std::unique_ptr<AtenExecutor>(new AtenExecutor(std::move(plan).value()));
  } catch (const c10::Error& error) {
    // Not expected from schema lookups and literal conversions, but building a plan must
    // never take the process down: the runtime falls back to eager instead.
    return make_error(std::string("eager backend: ") + error.what_without_backtrace());
  } catch (const std::exception& error) {
    return make_error(std::string("eager backend: ") + error.what());
  }
}

size_t AtenExecutor::num_inputs() const { return plan_->input_slots.size(); }
size_t AtenExecutor::num_outputs() const { return plan_->graph_output_slots.size(); }
size_t AtenExecutor::num_steps() const { return plan_->steps.size(); }
int64_t AtenExecutor::arena_bytes() const { return plan_->arena_bytes; }
size_t AtenExecutor::planned_outputs() const { return plan_->planned_outputs; }
size_t AtenExecutor::arena_allocations() const {
  return arenas_->allocations.load(std::memory_order_relaxed);
}

std::vector<at::Tensor> AtenExecutor::run(const std::vector<at::Tensor>& inputs) const {
  const Plan& plan = *plan_;
  TORCH_CHECK(inputs.size() == plan.input_slots.size(), "the graph takes ", plan.input_slots.size(),
              " input(s), got ", inputs.size());
  exec::RunState state(plan, *arenas_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (plan.input_slots[i] >= 0) state.slots[static_cast<size_t>(plan.input_slots[i])] = inputs[i];
  }
  for (const exec::Step& step : plan.steps) exec::run_step(state, step);
  std::vector<at::Tensor> outputs;
  outputs.reserve(plan.graph_output_slots.size());
  for (int32_t slot : plan.graph_output_slots) {
    outputs.push_back(state.slots[static_cast<size_t>(slot)].toTensor());
  }
  return outputs;
}

}  // namespace dynvm::codegen
