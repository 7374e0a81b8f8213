// Variant: running a captured graph on a call's tensors (through a CUDA graph under
// mode="reduce-overhead") and rebuilding the result.
#include "dynvm/runtime/variant.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/python_variable.h>

#include <map>
#include <optional>
#include <utility>

#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/codegen/run_glue.h"
#include "dynvm/graph/specialize_shapes.h"
#include "dynvm/runtime/compiled_function.h"
#include "dynvm/runtime/cuda_graph_replay.h"
#include "dynvm/runtime/frame_hook.h"
#include "dynvm/runtime/graph_autograd_node.h"
#include "dynvm/vm/source_resolver.h"

namespace dynvm::runtime {

bool grad_mode_enabled() { return c10::GradMode::is_enabled(); }
void set_grad_mode_enabled(bool enabled) { c10::GradMode::set_enabled(enabled); }

Variant::Variant(vm::Trace trace) : trace_(std::move(trace)) {}
Variant::~Variant() = default;

size_t Variant::kernel_count() const { return executor_ ? executor_->kernel_count() : 0; }
std::string Variant::to_dot(const std::string& name) const {
  return executor_ ? executor_->to_dot(trace_.graph, name) : "";
}

std::string Variant::why_not_fused() const { return executor_ ? executor_->why_not_fused() : ""; }

const codegen::CompiledBackward* Variant::compiled_backward() const {
  return executor_ ? executor_->compiled_backward().get() : nullptr;
}

std::string Variant::why_no_compiled_backward() const {
  return executor_ ? executor_->why_no_compiled_backward() : "";
}

std::string Variant::cuda_graph_note() const {
  if (cuda_graph_) return cuda_graph_->note();
  if (cuda_graph_per_size_) {
    return "records a CUDA graph for each size (dynamic shapes), after " +
           std::to_string(CudaGraphReplay::kWarmupCalls) + " call" +
           (CudaGraphReplay::kWarmupCalls == 1 ? "" : "s") + " at that size";
  }
  return cuda_graph_why_not_.empty() ? "" : "not a CUDA graph: " + cuda_graph_why_not_;
}

void Variant::compile_guards() const {
  checks_before_glue_ = -1;
  const GlueRun* run = glue_run_.graph != nullptr ? &glue_run_ : nullptr;
  auto glue = GuardGlue::compile(trace_.guards, run ? "variant" : "guards", run);
  if (!glue) return;  // no JIT here: the interpreter serves
  glue_ = std::move(glue).value();
  ++counters().guard_glues;
}

bool Variant::guards_hold(const vm::FrameInputs& inputs, vm::GuardFailure* why,
                          GlueValues* keep) const {
  if (why == nullptr) {
    if (!glue_ && checks_before_glue_ >= 0 && checks_before_glue_-- == 0) compile_guards();
    if (glue_ && keep != nullptr && glue_->runs()) {
      HookPause pause;  // the graph's run, as in run()
      int64_t code = glue_->check_and_run(inputs, keep);
      if (keep->run() == GlueValues::Run::Done) ++counters().glue_runs;
      return code < 0 || code == kGlueRunFailed;
    }
    if (glue_) return glue_->first_failure(inputs, keep) < 0;
  }
  return vm::guards_hold(trace_.guards, inputs, why);
}

namespace {

// Whether a graph input is read where it lives under a CUDA graph: a module's parameter or
// buffer, or a tensor the trace captured, whose address stays put between calls (a
// recording is made again when it moves). Arguments are copied into static buffers.
bool read_in_place(const vm::InputBinding& binding) {
  if (!binding.source) return true;
  using K = vm::Source::Kind;
  return binding.source->kind() == K::ModuleParam || binding.source->kind() == K::ModuleBuffer;
}

}  // namespace

Expected<std::unique_ptr<Variant>> Variant::build(vm::Trace trace, const std::string& backend,
                                                  const std::string& mode,
                                                  const std::string& where) {
  std::unique_ptr<Variant> v(new Variant(std::move(trace)));
  const GuardGluePolicy& policy = guard_glue_policy();
  bool compiles = policy.enabled && v->trace_.guards.size() <= policy.max_guards;
  v->checks_before_glue_ = compiles ? policy.after_checks : -1;
  v->backend_ = backend;
  v->mode_ = mode;
  if (!v->eager()) {
    const graph::Graph& traced = v->trace_.graph;
    bool symbolic = traced.is_symbolic();
    // A graph with dynamic shapes runs specialized to each call's sizes (executor_for);
    // the trace's own sizes are the first.
    Expected<graph::Graph> at_hints =
        symbolic ? graph::specialize_shapes(traced, traced.symbol_hints()) : graph::Graph();
    if (!at_hints) return at_hints.error();
    auto executor = codegen::CompiledGraph::build(symbolic ? *at_hints : traced, backend,
                                                  v->trace_.grad_enabled_at_start,
                                                  /*autotune=*/mode == "max-autotune");
    if (!executor) return executor.error();
    v->executor_ = std::move(executor).value();
    if (symbolic) {
      v->symbol_inputs_.assign(traced.symbols().size(), {-1, -1});
      for (size_t i = 0; i < traced.inputs().size(); ++i) {
        const graph::TensorMeta* meta = traced.inputs()[i]->meta();
        if (meta == nullptr || !meta->is_symbolic()) continue;
        for (size_t d = 0; d < meta->sym_sizes.size(); ++d) {
          std::vector<int32_t> used = meta->sym_sizes[d].symbols();
          if (used.size() != 1 || meta->sym_sizes[d] != graph::SymExpr::symbol(used[0])) continue;
          auto& binding = v->symbol_inputs_[static_cast<size_t>(used[0])];
          if (binding.first < 0) binding = {static_cast<int>(i), static_cast<int>(d)};
        }
      }
      for (const auto& binding : v->symbol_inputs_) {
        if (binding.first < 0) return make_error("dynamic shapes: a size symbol no input gives");
      }
      v->specializations_[traced.symbol_hints()] = Specialization{v->executor_, 0, nullptr, ""};
    }
    bool bindable = true;  // every graph input comes from a guarded source or is captured
    for (const vm::InputBinding& binding : v->trace_.inputs) {
      v->input_slots_.push_back(binding.source ? v->input_sources_.intern(binding.source) : -1);
      int guarded =
          binding.source ? v->trace_.guards.sources().find(binding.source->to_string()) : -1;
      v->guard_slots_.push_back(guarded);
      v->glue_run_.input_sources.push_back(guarded);
      v->glue_run_.captured.push_back(binding.source ? nullptr : binding.captured.get());
      bindable = bindable && (guarded >= 0 || (!binding.source && binding.captured));
    }
    // max-autotune also replays CUDA graphs, as torch.compile's does.
    if ((mode == "reduce-overhead" || mode == "max-autotune") && v->trace_.graph.num_nodes() > 0) {
      // A graph with symbols: judged on its specialization to the traced sizes, and then
      // each size gets its own CUDA graph (as Inductor's CUDA graph trees record one per
      // distinct size).
      v->cuda_graph_why_not_ = backend != "dynvm"
                                   ? "backend '" + backend + "' runs the graph op by op"
                               : v->executor_->records_autograd()
                                   ? "autograd records the graph (an input requires grad)"
                                   : CudaGraphReplay::why_not(v->trace_.graph, *v->executor_);
      if (v->cuda_graph_why_not_.empty()) {
        for (const vm::InputBinding& binding : v->trace_.inputs) {
          v->cuda_graph_in_place_.push_back(read_in_place(binding));
        }
        v->where_ = where;
        if (symbolic) {
          v->cuda_graph_per_size_ = true;
        } else {
          v->cuda_graph_ = std::make_unique<CudaGraphReplay>(v->executor_.get(), v->trace_.graph,
                                                             v->cuda_graph_in_place_, where);
        }
      }
    }
    // A CUDA graph's run, and one autograd records, go through run_graph, not the guards'
    // native function.
    if (policy.run && bindable && !symbolic && !v->cuda_graph_ &&
        !v->executor_->records_autograd()) {
      v->glue_run_.graph = v->executor_.get();
      v->glue_run_.pack = packable(v->trace_) ? &v->trace_.output : nullptr;
    }
  }
  if (v->checks_before_glue_ == 0) v->compile_guards();
  return v;
}

namespace {

// What one rebuild keeps: the objects rebuilt for recipes with a `memo` number, so a value
// reached twice comes back as one object, and the values of sources read before any side
// effect is replayed (read_sources_early).
struct Memo {
  std::vector<PyRef> objects;
  std::map<const vm::OutputRecipe*, PyRef> early;  // FromSource recipe -> its value
};

// A source names a place as it was when the call started, and the traced code read it
// before any of its own writes reached the real objects. Those writes are replayed after
// the graph, and may reach the same place under another name (`v = vars(box)['n']` then
// `box.n += 1`, or `a, b = b, a` on attributes), so the values the recipes read from
// sources are taken before the first of them.
void read_sources_early(const vm::OutputRecipe& recipe, const vm::FrameInputs& inputs, Memo* memo) {
  if (recipe.kind == vm::OutputRecipe::Kind::FromSource && recipe.source) {
    PyRef value = vm::resolve_source(recipe.source, inputs);
    if (value) {
      memo->early.emplace(&recipe, std::move(value));
    } else {
      PyErr_Clear();  // rebuilt late instead, which reports the failure
    }
  }
  for (const vm::OutputRecipe& item : recipe.items) read_sources_early(item, inputs, memo);
}

PyObject* grad_mode_exit(bool restore) {
  static PyObject* make = nullptr;  // dynvm._tracing.grad_mode_exit, kept for the process
  if (make == nullptr) {
    PyRef module = PyRef::steal(PyImport_ImportModule("dynvm._tracing"));
    if (!module) return nullptr;
    make = PyObject_GetAttrString(module.get(), "grad_mode_exit");
    if (make == nullptr) return nullptr;
  }
  return PyObject_CallOneArg(make, restore ? Py_True : Py_False);
}

PyObject* rebuild(const vm::OutputRecipe& recipe, const std::vector<at::Tensor>& outputs,
                  const vm::FrameInputs& inputs, Memo* memo);

PyObject* rebuild_items_list(const vm::OutputRecipe& recipe, const std::vector<at::Tensor>& outputs,
                             const vm::FrameInputs& inputs, Memo* memo) {
  PyRef items = PyRef::steal(PyList_New(static_cast<Py_ssize_t>(recipe.items.size())));
  if (!items) return nullptr;
  for (size_t i = 0; i < recipe.items.size(); ++i) {
    PyObject* item = rebuild(recipe.items[i], outputs, inputs, memo);
    if (item == nullptr) return nullptr;
    PyList_SET_ITEM(items.get(), static_cast<Py_ssize_t>(i), item);
  }
  return items.release();
}

PyObject* rebuild_new(const vm::OutputRecipe& recipe, const std::vector<at::Tensor>& outputs,
                      const vm::FrameInputs& inputs, Memo* memo) {
  using Kind = vm::OutputRecipe::Kind;
  switch (recipe.kind) {
    case Kind::GraphOutput:
      return THPVariable_Wrap(outputs[static_cast<size_t>(recipe.index)]);
    case Kind::Constant:
    case Kind::Size:
      return Py_NewRef(recipe.constant.get());
    case Kind::FreshCopy: {
      static PyObject* copy = nullptr;  // copy.copy, for the process
      if (copy == nullptr) {
        PyRef module = PyRef::steal(PyImport_ImportModule("copy"));
        if (!module) return nullptr;
        copy = PyObject_GetAttrString(module.get(), "copy");
        if (copy == nullptr) return nullptr;
      }
      return PyObject_CallOneArg(copy, recipe.constant.get());
    }
    case Kind::FromSource: {
      auto early = memo->early.find(&recipe);
      if (early != memo->early.end()) return Py_NewRef(early->second.get());
      PyRef value = vm::resolve_source(recipe.source, inputs);
      if (!value) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: cannot rebuild a value");
        return nullptr;
      }
      return value.release();
    }
    case Kind::Tuple:
    case Kind::List: {
      PyRef items = PyRef::steal(rebuild_items_list(recipe, outputs, inputs, memo));
      if (!items) return nullptr;
      if (recipe.kind == Kind::List) return items.release();
      PyRef tuple = PyRef::steal(PyList_AsTuple(items.get()));
      if (!tuple || !recipe.constant) return tuple.release();
      // A named tuple or structseq (torch.return_types.max): rebuild its type.
      PyObject* type = recipe.constant.get();
      PyRef make = PyRef::steal(PyObject_GetAttrString(type, "_make"));
      if (make) return PyObject_CallOneArg(make.get(), tuple.get());
      PyErr_Clear();
      return PyObject_CallOneArg(type, tuple.get());
    }
    case Kind::NewObject: {
      // An instance the traced code made: a fresh object with the attributes it set and, for a
      // dict subclass, the items it holds. Neither goes through the class's own __setattr__
      // or __setitem__: the traced code already ran those, this restores their result.
      PyRef held = PyRef::borrow(recipe.object_class.get());
      if (!held) {  // the guards on the class fail first: not reached
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: the class to rebuild is gone");
        return nullptr;
      }
      PyObject* cls = held.get();
      PyObject* names = PyTuple_GET_ITEM(recipe.constant.get(), 0);
      PyObject* item_keys = PyTuple_GET_ITEM(recipe.constant.get(), 1);
      PyRef object = PyRef::steal(PyObject_CallMethod(cls, "__new__", "O", cls));
      if (!object) return nullptr;
      if (recipe.memo >= 0) {  // an attribute may refer back to the object
        std::vector<PyRef>& objects = memo->objects;
        if (objects.size() <= static_cast<size_t>(recipe.memo)) objects.resize(recipe.memo + 1);
        objects[static_cast<size_t>(recipe.memo)] = object;
      }
      size_t next = 0;
      if (names == Py_None) {
        PyRef dict = PyRef::steal(rebuild(recipe.items.at(next++), outputs, inputs, memo));
        if (!dict || PyObject_GenericSetDict(object.get(), dict.get(), nullptr) < 0) return nullptr;
      } else {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
          PyRef value = PyRef::steal(rebuild(recipe.items.at(next++), outputs, inputs, memo));
          if (!value ||
              PyObject_GenericSetAttr(object.get(), PyTuple_GET_ITEM(names, i), value.get()) < 0) {
            return nullptr;
          }
        }
      }
      if (item_keys != Py_None) {
        // The builtin base (dict, OrderedDict) keeps the items: its own __setitem__ stores them.
        auto* base = reinterpret_cast<PyTypeObject*>(cls);
        while (base != nullptr && (base->tp_flags & Py_TPFLAGS_HEAPTYPE)) base = base->tp_base;
        if (base == nullptr || base->tp_as_mapping == nullptr ||
            base->tp_as_mapping->mp_ass_subscript == nullptr) {
          PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: no dict base to rebuild");
          return nullptr;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(item_keys); ++i) {
          PyRef value = PyRef::steal(rebuild(recipe.items.at(next++), outputs, inputs, memo));
          if (!value || base->tp_as_mapping->mp_ass_subscript(
                            object.get(), PyTuple_GET_ITEM(item_keys, i), value.get()) < 0) {
            return nullptr;
          }
        }
      }
      return object.release();
    }
    case Kind::Dict: {
      PyRef dict = PyRef::steal(PyDict_New());
      if (!dict) return nullptr;
      PyObject* keys = recipe.constant.get();
      for (size_t i = 0; i < recipe.items.size(); ++i) {
        PyRef value = PyRef::steal(rebuild(recipe.items[i], outputs, inputs, memo));
        if (!value) return nullptr;
        if (PyDict_SetItem(dict.get(), PyTuple_GET_ITEM(keys, static_cast<Py_ssize_t>(i)),
                           value.get()) < 0) {
          return nullptr;
        }
      }
      if (recipe.dict_type) return PyObject_CallOneArg(recipe.dict_type.get(), dict.get());
      return dict.release();
    }
    case Kind::Function: {
      PyObject* parts = recipe.constant.get();  // (code, globals or None: the frame's)
      PyObject* globals = PyTuple_GET_ITEM(parts, 1);
      if (globals == Py_None) globals = inputs.globals;
      if (globals == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: no globals to rebuild with");
        return nullptr;
      }
      PyRef function = PyRef::steal(PyFunction_New(PyTuple_GET_ITEM(parts, 0), globals));
      if (!function) return nullptr;
      using Setter = int (*)(PyObject*, PyObject*);
      const Setter setters[] = {PyFunction_SetDefaults, PyFunction_SetKwDefaults,
                                PyFunction_SetClosure};
      for (size_t i = 0; i < 3; ++i) {
        PyRef part = PyRef::steal(rebuild(recipe.items.at(i), outputs, inputs, memo));
        if (!part) return nullptr;
        if (part.get() != Py_None && setters[i](function.get(), part.get()) < 0) return nullptr;
      }
      return function.release();
    }
    case Kind::DictView: {
      PyRef dict = PyRef::steal(rebuild(recipe.items.at(0), outputs, inputs, memo));
      if (!dict) return nullptr;
      return PyObject_CallMethodNoArgs(dict.get(), recipe.constant.get());
    }
    case Kind::Null:
      PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: NULL where a value is needed");
      return nullptr;
    case Kind::Iterator: {
      PyRef items = PyRef::steal(rebuild_items_list(recipe, outputs, inputs, memo));
      if (!items) return nullptr;
      return PyObject_GetIter(items.get());
    }
    case Kind::GradModeExit:
      return grad_mode_exit(recipe.index != 0);
    case Kind::Cell: {
      const vm::OutputRecipe& contents = recipe.items.at(0);
      if (contents.kind == Kind::Null) return PyCell_New(nullptr);
      PyRef value = PyRef::steal(rebuild(contents, outputs, inputs, memo));
      if (!value) return nullptr;
      return PyCell_New(value.get());
    }
    case Kind::FreeCell:
      if (inputs.closure == nullptr || !PyTuple_Check(inputs.closure) ||
          recipe.index >= PyTuple_GET_SIZE(inputs.closure)) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: no closure cell to rebuild");
        return nullptr;
      }
      return Py_NewRef(PyTuple_GET_ITEM(inputs.closure, recipe.index));
    case Kind::Method: {
      PyRef function = PyRef::steal(rebuild(recipe.items.at(0), outputs, inputs, memo));
      if (!function) return nullptr;
      PyRef self = PyRef::steal(rebuild(recipe.items.at(1), outputs, inputs, memo));
      if (!self) return nullptr;
      return PyMethod_New(function.get(), self.get());
    }
    case Kind::MemoRef: {
      size_t i = static_cast<size_t>(recipe.index);
      if (i >= memo->objects.size() || !memo->objects[i]) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: a shared value rebuilt late");
        return nullptr;
      }
      return Py_NewRef(memo->objects[i].get());
    }
  }
  return nullptr;
}

PyObject* rebuild(const vm::OutputRecipe& recipe, const std::vector<at::Tensor>& outputs,
                  const vm::FrameInputs& inputs, Memo* memo) {
  PyObject* built = rebuild_new(recipe, outputs, inputs, memo);
  if (built != nullptr && recipe.memo >= 0) {
    std::vector<PyRef>& objects = memo->objects;
    if (objects.size() <= static_cast<size_t>(recipe.memo)) objects.resize(recipe.memo + 1);
    objects[static_cast<size_t>(recipe.memo)] = PyRef::borrow(built);
  }
  return built;
}

// A frame slot's value, where Null (CPython's NULL) is not an error.
bool rebuild_slot(const vm::OutputRecipe& recipe, const std::vector<at::Tensor>& outputs,
                  const vm::FrameInputs& inputs, Memo* memo, PyRef* out) {
  if (recipe.kind == vm::OutputRecipe::Kind::Null) {
    *out = PyRef();
    return true;
  }
  *out = PyRef::steal(rebuild(recipe, outputs, inputs, memo));
  return static_cast<bool>(*out);
}

// Mutations of pre-existing objects, in the order the function made them. Their targets
// are found before any is replayed, as their values' sources are (read_sources_early): an
// object reached through an attribute an earlier write rebinds is still the one the traced
// code wrote to.
bool replay_side_effects(const std::vector<vm::SideEffect>& effects,
                         const std::vector<at::Tensor>& outputs, const vm::FrameInputs& inputs,
                         Memo* memo) {
  std::vector<PyRef> targets;
  targets.reserve(effects.size());
  for (const vm::SideEffect& effect : effects) {
    bool frame_globals = !effect.target && (effect.kind == vm::SideEffect::Kind::SetGlobal ||
                                            effect.kind == vm::SideEffect::Kind::DeleteGlobal);
    targets.push_back(frame_globals ? PyRef::borrow(inputs.globals)
                                    : vm::resolve_source(effect.target, inputs));
    if (!targets.back()) PyErr_Clear();  // reported below, when its turn comes
  }
  for (size_t e = 0; e < effects.size(); ++e) {
    const vm::SideEffect& effect = effects[e];
    const PyRef& target = targets[e];
    PyRef value = PyRef::steal(rebuild(effect.value, outputs, inputs, memo));
    if (!target || !value) {
      if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: cannot replay a side effect");
      }
      return false;
    }
    int rc = 0;
    switch (effect.kind) {
      case vm::SideEffect::Kind::SetAttr:
        rc = PyObject_SetAttrString(target.get(), effect.name.c_str(), value.get());
        break;
      case vm::SideEffect::Kind::ReplaceList:
        rc = PyList_SetSlice(target.get(), 0, PyList_GET_SIZE(target.get()), value.get());
        break;
      case vm::SideEffect::Kind::ReplaceDict:
        PyDict_Clear(target.get());
        rc = PyDict_Update(target.get(), value.get());
        break;
      case vm::SideEffect::Kind::AdvanceIterator: {
        Py_ssize_t count = PyLong_AsSsize_t(value.get());
        if (count < 0) return false;
        for (Py_ssize_t i = 0; i < count; ++i) {
          PyRef item = PyRef::steal(PyIter_Next(target.get()));
          if (!item) {
            if (!PyErr_Occurred()) {
              PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: an iterator ran out");
            }
            return false;
          }
        }
        break;
      }
      case vm::SideEffect::Kind::GenericSetAttr: {
        PyRef name = PyRef::steal(PyUnicode_FromString(effect.name.c_str()));
        rc = name ? PyObject_GenericSetAttr(target.get(), name.get(), value.get()) : -1;
        break;
      }
      case vm::SideEffect::Kind::BaseSetItem: {
        // The builtin dict type under the subclass stores the item, as dict.__setitem__ did.
        PyTypeObject* base = Py_TYPE(target.get());
        while (base != nullptr && (base->tp_flags & Py_TPFLAGS_HEAPTYPE)) base = base->tp_base;
        PyRef key = PyRef::steal(PyUnicode_FromString(effect.name.c_str()));
        if (base == nullptr || base->tp_as_mapping == nullptr ||
            base->tp_as_mapping->mp_ass_subscript == nullptr || !key) {
          PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: no dict base to replay on");
          return false;
        }
        rc = base->tp_as_mapping->mp_ass_subscript(target.get(), key.get(), value.get());
        break;
      }
      case vm::SideEffect::Kind::SetGlobal:
      case vm::SideEffect::Kind::DeleteGlobal: {
        PyRef key = PyRef::steal(PyUnicode_FromString(effect.name.c_str()));
        if (!key) return false;
        if (!PyDict_Check(target.get())) {
          PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: globals that are no dict");
          return false;
        }
        if (effect.kind == vm::SideEffect::Kind::SetGlobal) {
          rc = PyDict_SetItem(target.get(), key.get(), value.get());
          break;
        }
        // Gone already only when the trace set the name itself before deleting it (the
        // delete of a name it did not set is guarded on the name being there).
        rc = PyDict_DelItem(target.get(), key.get());
        if (rc < 0 && PyErr_ExceptionMatches(PyExc_KeyError)) {
          PyErr_Clear();
          rc = 0;
        }
        break;
      }
      case vm::SideEffect::Kind::CallMethod: {
        PyRef method = PyRef::steal(PyObject_GetAttrString(target.get(), effect.name.c_str()));
        if (!method || !PyTuple_Check(value.get()) || PyTuple_GET_SIZE(value.get()) != 2) {
          if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError,
                            "dynvm: internal error: a deferred call's arguments");
          }
          return false;
        }
        PyObject* keywords = PyTuple_GET_ITEM(value.get(), 1);
        PyRef result =
            PyRef::steal(PyObject_Call(method.get(), PyTuple_GET_ITEM(value.get(), 0),
                                       PyDict_GET_SIZE(keywords) != 0 ? keywords : nullptr));
        rc = result ? 0 : -1;
        break;
      }
    }
    if (rc < 0) return false;
  }
  return true;
}

}  // namespace

bool Variant::run_graph(const vm::FrameInputs& inputs, const GlueValues* checked,
                        std::vector<at::Tensor>* outputs) const {
  std::vector<at::Tensor> tensors;
  tensors.reserve(trace_.inputs.size());
  {
    std::optional<vm::SourceResolver> resolver;  // made when the check kept too little
    for (size_t i = 0; i < trace_.inputs.size(); ++i) {
      PyObject* object = checked != nullptr ? checked->value(guard_slots_[i]) : nullptr;
      if (object == nullptr) {
        if (input_slots_[i] >= 0) {
          if (!resolver) resolver.emplace(input_sources_, inputs);
          object = resolver->resolve(input_slots_[i]);
        } else {
          object = trace_.inputs[i].captured.get();
        }
      }
      if (object == nullptr || !THPVariable_Check(object)) {
        PyErr_SetString(PyExc_RuntimeError, "dynvm: internal error: a graph input is not a tensor");
        return false;
      }
      tensors.push_back(THPVariable_Unpack(object));
    }
  }
  std::shared_ptr<codegen::CompiledGraph> executor = executor_;
  CudaGraphReplay* replay = cuda_graph_.get();
  if (!symbol_inputs_.empty()) {
    Specialization* specialization = specialization_for(tensors);
    if (specialization == nullptr) return false;
    executor = specialization->executor;
    replay = specialization->cuda_graph.get();
  }
  try {
    if (replay != nullptr) {
      *outputs = replay->run(tensors);
    } else if (executor->compiled_backward()) {
      *outputs = run_with_compiled_backward(executor, tensors);
    } else if (executor->records_autograd()) {
      *outputs = run_with_recomputed_backward(executor, tensors);
    } else {
      *outputs = executor->run(tensors);
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return false;
  }
  return true;
}

Variant::Specialization* Variant::specialization_for(const std::vector<at::Tensor>& tensors) const {
  std::vector<int64_t> values;
  values.reserve(symbol_inputs_.size());
  for (const auto& [input, dim] : symbol_inputs_) {
    values.push_back(tensors[static_cast<size_t>(input)].size(dim));
  }
  ++specialization_clock_;
  auto found = specializations_.find(values);
  if (found != specializations_.end()) {
    Specialization& s = found->second;
    s.last_used = specialization_clock_;
    if (cuda_graph_per_size_ && !s.cuda_graph && s.cuda_graph_why_not.empty()) {
      give_cuda_graph(s, values);
    }
    return &s;
  }
  Expected<graph::Graph> graph = graph::specialize_shapes(trace_.graph, values);
  if (!graph) {
    PyErr_SetString(PyExc_RuntimeError,
                    ("dynvm: internal error: " + graph.error().message).c_str());
    return nullptr;
  }
  auto built = codegen::CompiledGraph::build(*graph, backend_, trace_.grad_enabled_at_start,
                                             /*autotune=*/mode_ == "max-autotune");
  if (!built) {
    PyErr_SetString(
        PyExc_RuntimeError,
        ("dynvm: compiling the graph for these sizes failed: " + built.error().message).c_str());
    return nullptr;
  }
  // Memory stays bounded when sizes keep changing: past the limit the least recently used
  // specialization goes (a size met again compiles again, from the kernel cache on disk).
  constexpr size_t kMaxSpecializations = 64;
  if (specializations_.size() >= kMaxSpecializations) {
    auto oldest = specializations_.begin();
    for (auto it = specializations_.begin(); it != specializations_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    specializations_.erase(oldest);
  }
  std::shared_ptr<codegen::CompiledGraph> executor = std::move(built).value();
  Specialization& s = specializations_[values] =
      Specialization{executor, specialization_clock_, nullptr, ""};
  counters().kernels += static_cast<int64_t>(executor->kernel_count());
  if (cuda_graph_per_size_) give_cuda_graph(s, values);
  return &s;
}

void Variant::give_cuda_graph(Specialization& s, const std::vector<int64_t>& values) const {
  s.cuda_graph_why_not = s.executor->records_autograd()
                             ? "autograd records the graph (an input requires grad)"
                             : CudaGraphReplay::why_not(trace_.graph, *s.executor);
  if (!s.cuda_graph_why_not.empty()) return;
  size_t live = 0;
  Specialization* oldest = nullptr;
  for (auto& [key, other] : specializations_) {
    if (!other.cuda_graph) continue;
    ++live;
    if (oldest == nullptr || other.last_used < oldest->last_used) oldest = &other;
  }
  if (live >= kMaxCudaGraphs && oldest != nullptr) oldest->cuda_graph.reset();
  std::string sizes;
  for (int64_t v : values) sizes += (sizes.empty() ? "" : ", ") + std::to_string(v);
  s.cuda_graph = std::make_shared<CudaGraphReplay>(
      s.executor.get(), trace_.graph, cuda_graph_in_place_, where_ + " at sizes (" + sizes + ")");
}

PyObject* Variant::run(const vm::FrameInputs& inputs) const {
  Outcome outcome;
  if (!run(inputs, &outcome)) return nullptr;
  return outcome.value.release();
}

bool Variant::run(const vm::FrameInputs& inputs, Outcome* out, GlueValues* checked) const {
  if (checked != nullptr && checked->run() == GlueValues::Run::Failed) {
    PyErr_SetString(PyExc_RuntimeError, checked->run_error().c_str());
    return false;
  }
  if (checked != nullptr && checked->run() == GlueValues::Run::Done) {
    out->value = PyRef::steal(checked->take_result());
    if (out->value) return true;  // the glue packed it
    return finish(inputs, codegen::run_frame_outputs(*checked->frame()), out);
  }
  std::vector<at::Tensor> outputs;
  if (!run_graph(inputs, checked, &outputs)) return false;
  return finish(inputs, outputs, out);
}

bool Variant::finish(const vm::FrameInputs& inputs, const std::vector<at::Tensor>& outputs,
                     Outcome* out) const {
  Memo memo;
  if (!trace_.side_effects.empty()) {
    for (const vm::SideEffect& effect : trace_.side_effects) {
      read_sources_early(effect.value, inputs, &memo);
    }
    if (trace_.resume) {
      for (const vm::OutputRecipe& r : trace_.resume->locals) read_sources_early(r, inputs, &memo);
      for (const vm::OutputRecipe& r : trace_.resume->stack) read_sources_early(r, inputs, &memo);
    }
  }
  if (!trace_.resume) {
    // The return value is rebuilt before the side effects are replayed.
    out->value = PyRef::steal(rebuild(trace_.output, outputs, inputs, &memo));
    if (!out->value) return false;
    return replay_side_effects(trace_.side_effects, outputs, inputs, &memo);
  }
  // Side effects first: the recipes were numbered in this order (memo), and the frame's
  // values see the objects as the side effects left them.
  if (!replay_side_effects(trace_.side_effects, outputs, inputs, &memo)) return false;
  const vm::ResumePoint& resume = *trace_.resume;
  out->locals.resize(resume.locals.size());
  out->keep_local.assign(resume.locals.size(), false);
  for (size_t i = 0; i < resume.locals.size(); ++i) {
    const vm::OutputRecipe& r = resume.locals[i];
    if (r.kind == vm::OutputRecipe::Kind::FromSource && !r.source) {
      out->keep_local[i] = true;
      continue;
    }
    if (!rebuild_slot(r, outputs, inputs, &memo, &out->locals[i])) return false;
  }
  out->stack.resize(resume.stack.size());
  for (size_t i = 0; i < resume.stack.size(); ++i) {
    if (!rebuild_slot(resume.stack[i], outputs, inputs, &memo, &out->stack[i])) return false;
  }
  return true;
}

}  // namespace dynvm::runtime
