// Calls in the VM: inlining user functions and nn.Module.forward, handing torch
// callables to the bridge, and the builtins the VM evaluates itself.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "copies.h"
#include "dynvm/graph/graph.h"
#include "dynvm/graph/op_properties.h"
#include "inline_frame.h"
#include "known_objects.h"
#include "lazy_items.h"
#include "python_values.h"
#include "torch_bridge.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

namespace {

const KnownObjects& known() { return *KnownObjects::get(); }

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

ValuePtr none_value() { return TracedValue::constant(PyRef::borrow(Py_None)); }
ValuePtr bool_value(bool b) { return TracedValue::constant(PyRef::borrow(b ? Py_True : Py_False)); }
ValuePtr int_value(long long v) {
  return TracedValue::constant(PyRef::steal(PyLong_FromLongLong(v)));
}

// Torch functions that change global state or do I/O: never run during tracing.
bool is_denied_torch(const std::string& module, const std::string& name) {
  static const char* kModules[] = {"torch.random",  "torch.serialization", "torch.autograd",
                                   "torch.cuda",    "torch.distributed",   "torch.utils",
                                   "torch.jit",     "torch.hub",           "torch.multiprocessing",
                                   "torch.optim",   "torch._dynamo",       "torch.backends",
                                   "torch.testing", "torch.profiler"};
  for (const char* m : kModules) {
    if (module == m || starts_with(module, (std::string(m) + ".").c_str())) return true;
  }
  static const char* kNames[] = {"set_default_dtype",
                                 "set_default_tensor_type",
                                 "set_printoptions",
                                 "manual_seed",
                                 "seed",
                                 "initial_seed",
                                 "set_rng_state",
                                 "get_rng_state",
                                 "use_deterministic_algorithms",
                                 "set_num_threads",
                                 "compile",
                                 "save",
                                 "load",
                                 "set_warn_always",
                                 "set_flush_denormal",
                                 "set_anomaly_enabled"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

std::string name_of(PyObject* callable) {
  PyRef name = PyRef::steal(PyObject_GetAttrString(callable, "__qualname__"));
  if (!name) {
    PyErr_Clear();
    name = PyRef::steal(PyObject_GetAttrString(callable, "__name__"));
  }
  if (!name || !PyUnicode_Check(name.get())) {
    PyErr_Clear();
    return Py_TYPE(callable)->tp_name;
  }
  return PyUnicode_AsUTF8(name.get());
}

// A torch callable the bridge runs on fake tensors as one opaque call.
bool is_torch_callable(PyObject* callable) {
  if (Py_TYPE(callable) == &PyMethodDescr_Type || Py_TYPE(callable) == &PyWrapperDescr_Type) {
    PyObject* objclass =
        reinterpret_cast<PyDescrObject*>(callable)->d_type
            ? reinterpret_cast<PyObject*>(reinterpret_cast<PyDescrObject*>(callable)->d_type)
            : nullptr;
    return objclass != nullptr &&
           PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(objclass),
                            reinterpret_cast<PyTypeObject*>(known().tensor_base_type.get()));
  }
  std::string module = module_name_of(callable);
  if (module != "torch" && !starts_with(module, "torch.")) return false;
  if (starts_with(module, "torch.nn.modules")) return false;  // inlined
  // Gradient clipping reads `.grad`: inlined, the VM reads the gradients as graph inputs
  // (called on fakes, reading one is a graph break: TraceSession.fake_from_real).
  if (module == "torch.nn.utils.clip_grad") return false;
  return !is_denied_torch(module, name_of(callable));
}

bool all_concrete(const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  for (const auto& a : args) {
    if (!concrete_object(a)) return false;
  }
  for (const auto& kv : kwargs) {
    if (!concrete_object(kv.second)) return false;
  }
  return true;
}

// Wraps the result of a concrete call as a traced value with no source. `result` is
// borrowed from the one reference its caller drops after (the call's, or its tuple's).
ValuePtr from_concrete(PyObject* result) {
  if (PyTuple_CheckExact(result) || PyList_CheckExact(result)) {
    std::vector<ValuePtr> items;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(result); ++i) {
      items.push_back(from_concrete(PySequence_Fast_GET_ITEM(result, i)));
    }
    if (PyTuple_CheckExact(result)) return TracedValue::tuple(std::move(items));
    return TracedValue::list(std::move(items), true);
  }
  if (PyRange_Check(result)) {
    auto r = std::make_shared<TracedValue>();
    r->kind = TracedValue::Kind::Range;
    r->obj = PyRef::borrow(result);
    return r;
  }
  if (PyModule_Check(result) || PyType_Check(result) || PyCallable_Check(result)) {
    return TracedValue::object(PyRef::borrow(result));
  }
  return fresh_constant(PyRef::borrow(result), 1);
}

// Calls a pure function on concrete arguments.
// Concrete arguments as a call takes them: a tuple, and a dict (null when there are none).
std::pair<PyRef, PyRef> concrete_arguments(const std::vector<ValuePtr>& args,
                                           const KwArgs& kwargs) {
  PyRef tuple = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), concrete_object(args[i]).release());
  }
  PyRef kw;
  if (!kwargs.empty()) {
    kw = PyRef::steal(PyDict_New());
    for (const auto& [name, value] : kwargs) {
      PyDict_SetItemString(kw.get(), name.c_str(), concrete_object(value).get());
    }
  }
  return {std::move(tuple), std::move(kw)};
}

ValuePtr call_concrete(PyObject* callable, const std::vector<ValuePtr>& args,
                       const KwArgs& kwargs) {
  auto [tuple, kw] = concrete_arguments(args, kwargs);
  PyRef result = PyRef::steal(PyObject_Call(callable, tuple.get(), kw.get()));
  // The arguments are guarded constants: an exception is what the call raises every time.
  if (!result) raise_python_error("calling " + name_of(callable));
  return from_concrete(result.get());
}

// Fn.apply(*args) under grad mode with an argument that requires grad: one operator of the
// graph (dynvm._tracing.AutogradFunctionOp), which runs the Function's forward and, where
// autograd records it, Function.apply itself, so that its backward is the Function's own.
// Its arguments are tensors and constants (other values are a break); a Function whose
// output is an argument or a view of one (ctx.mark_dirty) is a break.
// A torch.autograd.Function's forward called inline on `args`, as Function.apply calls it
// (with a context whose backward bookkeeping does nothing, when forward takes one).
ValuePtr inline_forward(TraceContext& ctx, const ValuePtr& cls_value,
                        const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  const KnownObjects& k = known();
  PyObject* cls = cls_value->py();
  ValuePtr forward = load_attribute(ctx, cls_value, "forward");
  PyRef setup = PyRef::steal(PyObject_GetAttrString(cls, "setup_context"));
  if (!setup) unsupported_from_python_error("setup_context of an autograd.Function");
  std::vector<ValuePtr> forward_args(args);
  if (setup.get() == k.function_setup_context.get()) {
    // forward(ctx, *args): the context is an object of dynvm._tracing's no-op class.
    PyRef context_class =
        PyRef::steal(PyObject_GetAttrString(k.tracing.get(), "NoGradFunctionContext"));
    if (!context_class) unsupported_from_python_error("dynvm._tracing.NoGradFunctionContext");
    ValuePtr class_value =
        ctx.wrap(context_class.get(),
                 Source::attr(Source::module("dynvm._tracing"), "NoGradFunctionContext"));
    forward_args.insert(forward_args.begin(), new_object(ctx, class_value, {}, {}));
  }
  return call_value(ctx, forward, std::move(forward_args), kwargs);
}

bool is_immutable_constant(PyObject* o);

ValuePtr autograd_function_operator(TraceContext& ctx, const ValuePtr& cls_value,
                                    const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  std::string what = "a torch.autograd.Function applied under grad mode";
  if (!kwargs.empty()) unsupported(what + " with keywords");
  {
    // The forward traced first, to prove it pure before the operator runs it on fake
    // tensors (under grad mode, unlike Function.apply: a grad-mode switch recorded here
    // would stay in the graph and keep it from one autograd node): where it breaks (a print) the
    // call is a break, so eager runs it; so is one that changes an existing object or
    // draws random numbers. What it records is not used, and is removed.
    size_t effects = ctx.side_effects.size();
    size_t mutations = ctx.container_mutations;
    size_t nodes = ctx.bridge->graph().num_nodes();
    std::vector<graph::Value*> inputs;
    for (const ValuePtr& a : args) {
      inputs.push_back(a->is_tensor() ? ctx.bridge->value_for_fake(a->py()) : nullptr);
    }
    inline_forward(ctx, cls_value, args, kwargs);
    if (ctx.side_effects.size() != effects || ctx.container_mutations != mutations) {
      unsupported(what + " whose forward changes objects that existed before it");
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i]->is_tensor() && ctx.bridge->value_for_fake(args[i]->py()) != inputs[i]) {
        unsupported(what + " whose forward changes an argument in place (ctx.mark_dirty)");
      }
    }
    std::vector<graph::Node*> recorded;
    size_t seen = 0;
    for (graph::Node* node : ctx.bridge->graph().nodes()) {
      if (seen++ < nodes) continue;
      if (graph::node_draws_random(*node)) {
        unsupported(what + " whose forward draws random numbers");
      }
      recorded.push_back(node);
    }
    // Removed, last first, where nothing reads them.
    for (auto it = recorded.rbegin(); it != recorded.rend(); ++it) {
      bool used = false;
      for (size_t i = 0; i < (*it)->num_outputs(); ++i) used = used || (*it)->output(i)->has_uses();
      if (!used) ctx.bridge->graph().remove(*it);
    }
  }
  PyRef arguments = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  std::vector<ValuePtr> tensors;
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef object = args[i]->is_tensor() ? PyRef::borrow(args[i]->py()) : concrete_object(args[i]);
    if (!object || (!args[i]->is_tensor() && !is_immutable_constant(object.get()) &&
                    object.get() != Py_None && !PyBool_Check(object.get()))) {
      unsupported(what + " to a " + args[i]->describe());
    }
    if (args[i]->is_tensor()) tensors.push_back(args[i]);
    PyTuple_SET_ITEM(arguments.get(), static_cast<Py_ssize_t>(i), object.release());
  }
  PyRef op_class =
      PyRef::steal(PyObject_GetAttrString(known().tracing.get(), "AutogradFunctionOp"));
  PyRef info = op_class ? PyRef::steal(PyObject_CallMethod(op_class.get(), "of", "OO",
                                                           cls_value->py(), arguments.get()))
                        : PyRef();
  if (!info) unsupported_from_python_error(what);
  PyRef op = PyRef::steal(PyObject_GetAttrString(info.get(), "op"));
  if (!op) unsupported_from_python_error(what);
  ValuePtr result = ctx.bridge->call(op.get(), {TracedValue::list(std::move(tensors), false)}, {});
  PyRef single = PyRef::steal(PyObject_GetAttrString(info.get(), "single"));
  PyRef aliases = PyRef::steal(PyObject_GetAttrString(info.get(), "aliases"));
  if (!single || !aliases) unsupported_from_python_error(what);
  if (aliases.get() == Py_True) unsupported(what + " that returns an argument or a view of one");
  if (!result->is(TracedValue::Kind::List) && !result->is(TracedValue::Kind::Tuple)) {
    unsupported(what + ": its operator returned a " + result->describe());
  }
  // Each output is the operator's own: had the trace recorded the forward's operators
  // instead, the graph's backward would differentiate them, not run the Function's.
  for (const ValuePtr& item : result->items) {
    const graph::Node* producer =
        item->is_tensor() && item->graph_value != nullptr ? item->graph_value->producer() : nullptr;
    if (producer == nullptr || producer->op().rfind("dynvm_fn::", 0) != 0) {
      unsupported(what + ": the trace did not record it as one operator");
    }
  }
  if (single.get() == Py_True && result->items.size() == 1) return result->items[0];
  return TracedValue::tuple(result->items);
}

// Fn.apply(*args) for a torch.autograd.Function subclass when no gradient can flow (grad
// mode off, or no tensor argument requires grad): its forward, inlined, with a context
// whose backward bookkeeping does nothing. When a gradient could flow, one operator
// (autograd_function_operator). Null for other callables.
ValuePtr call_autograd_function(TraceContext& ctx, const ValuePtr& callable,
                                const std::vector<ValuePtr>& all_args, const KwArgs& kwargs) {
  PyObject* fn = callable->py();
  const KnownObjects& k = known();
  if (!callable->source || !k.autograd_function) return nullptr;
  ValuePtr cls_value;
  size_t first = 0;
  if (PyCFunction_Check(fn) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name, "apply") == 0) {
    // Torch 2.14: apply is a builtin bound to the class.
    PyObject* self = PyCFunction_GET_SELF(fn);
    if (self != nullptr && PyType_Check(self) &&
        PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(self),
                         reinterpret_cast<PyTypeObject*>(k.autograd_function.get()))) {
      cls_value = ctx.wrap(self, Source::attr(callable->source, "__self__"));
    }
  } else if (k.autograd_function_apply && fn == k.autograd_function_apply.get() &&
             !all_args.empty()) {
    // Older torch: Function.apply is a Python classmethod, called here with the class first.
    cls_value = all_args[0];
    first = 1;
  }
  if (!cls_value) return nullptr;
  std::vector<ValuePtr> args(all_args.begin() + static_cast<long>(first), all_args.end());
  PyObject* cls = cls_value->py();
  if (cls == nullptr || !PyType_Check(cls) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls),
                        reinterpret_cast<PyTypeObject*>(k.autograd_function.get()))) {
    return nullptr;
  }
  if (ctx.grad_enabled) {
    // Under grad mode a gradient flows when a tensor argument requires grad: the call is
    // one operator of the graph whose backward is the Function's own.
    for (const ValuePtr& a : args) {
      PyRef needs_grad =
          a->is_tensor() ? PyRef::steal(PyObject_GetAttrString(a->py(), "requires_grad")) : PyRef();
      bool no_grad_tensor = needs_grad && needs_grad.get() == Py_False;
      if (!no_grad_tensor && !a->is_constant()) {
        return autograd_function_operator(ctx, cls_value, args, kwargs);
      }
    }
    for (const auto& kv : kwargs) {
      if (!kv.second->is_constant()) unsupported("a torch.autograd.Function with keywords");
    }
  }
  return inline_forward(ctx, cls_value, args, kwargs);
}

// Whether `fn` carries torch._dynamo.assume_constant_result's marker.
bool marked_constant(PyObject* fn) {
  PyRef flag = PyRef::steal(PyObject_GetAttrString(fn, "_dynamo_marked_constant"));
  if (!flag) PyErr_Clear();
  return flag.get() == Py_True;
}

// torch.cuda._get_device_properties, which torch.cuda.get_device_properties and
// get_device_capability end in (transformers' MoE layers ask for the GPU's capability on
// every call): a device's properties are fixed for the process, so a call on a concrete
// device index is answered when traced. torch defines it when CUDA initialises.
bool is_device_properties_query(PyObject* fn) {
  static PyObject* name = PyUnicode_InternFromString("torch.cuda");  // kept for the process
  PyRef module = PyRef::steal(name != nullptr ? PyImport_GetModule(name) : nullptr);
  if (!module) {
    PyErr_Clear();
    return false;
  }
  PyRef query = PyRef::steal(PyObject_GetAttrString(module.get(), "_get_device_properties"));
  if (!query) PyErr_Clear();
  return query && query.get() == fn;
}

// operator's class `name`, a reference kept for the process; nullptr when missing.
PyObject* operator_class(const char* name) {
  PyRef module = PyRef::steal(PyImport_ImportModule("operator"));
  PyObject* cls = module ? PyObject_GetAttrString(module.get(), name) : nullptr;
  if (cls == nullptr) PyErr_Clear();
  return cls;
}

enum class OperatorGetter { None, Item, Attr };

// Which of operator.itemgetter and attrgetter `type` is.
OperatorGetter operator_getter_kind(PyObject* type) {
  static PyObject* const item_getter = operator_class("itemgetter");
  static PyObject* const attr_getter = operator_class("attrgetter");
  if (type != nullptr && type == item_getter) return OperatorGetter::Item;
  if (type != nullptr && type == attr_getter) return OperatorGetter::Attr;
  return OperatorGetter::None;
}

// An operator.itemgetter or attrgetter object called on a traced value: what it holds
// (read through __reduce__, as pickling does) applied as subscripts or attribute reads,
// one value for one item, else a tuple.
ValuePtr call_operator_getter(TraceContext& ctx, PyObject* getter, const ValuePtr& subject) {
  bool items =
      operator_getter_kind(reinterpret_cast<PyObject*>(Py_TYPE(getter))) == OperatorGetter::Item;
  PyRef reduced = PyRef::steal(PyObject_CallMethod(getter, "__reduce__", nullptr));
  if (!reduced || !PyTuple_Check(reduced.get()) || PyTuple_GET_SIZE(reduced.get()) < 2 ||
      !PyTuple_Check(PyTuple_GET_ITEM(reduced.get(), 1))) {
    unsupported_from_python_error("an operator getter's contents");
  }
  PyObject* held = PyTuple_GET_ITEM(reduced.get(), 1);  // borrowed
  std::vector<ValuePtr> results;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(held); ++i) {
    PyObject* what = PyTuple_GET_ITEM(held, i);
    if (items) {
      results.push_back(subscript(ctx, subject, TracedValue::constant(PyRef::borrow(what))));
      continue;
    }
    if (!PyUnicode_Check(what)) unsupported("attrgetter of a name that is not a str");
    ValuePtr value = subject;
    std::string dotted = PyUnicode_AsUTF8(what);
    size_t start = 0;
    while (true) {
      size_t dot = dotted.find('.', start);
      value = load_attribute(ctx, value, dotted.substr(start, dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    results.push_back(value);
  }
  if (results.size() == 1) return results[0];
  return TracedValue::tuple(std::move(results));
}

// namedtuple's _replace(**fields) on a traced named tuple: a new one of its class with those
// fields replaced. Only the method collections.namedtuple makes (its code is shared by
// every named tuple class); a field it does not have is eager's ValueError, a break.
ValuePtr replaced_named_tuple(const ValuePtr& tuple, const KwArgs& kwargs) {
  if (!tuple->is(TracedValue::Kind::Tuple) || !tuple->class_value || tuple->is_size) {
    unsupported("_replace() of a " + tuple->describe());
  }
  PyObject* cls = tuple->class_value->py();
  static PyObject* reference = [] {  // kept for the process
    PyRef collections = PyRef::steal(PyImport_ImportModule("collections"));
    PyRef made = collections ? PyRef::steal(PyObject_CallMethod(collections.get(), "namedtuple",
                                                                "ss", "Reference", "a"))
                             : PyRef();
    PyRef method = made ? PyRef::steal(PyObject_GetAttrString(made.get(), "_replace")) : PyRef();
    PyObject* code = method ? PyObject_GetAttrString(method.get(), "__code__") : nullptr;
    if (code == nullptr) PyErr_Clear();
    return code;
  }();
  PyRef method = PyRef::steal(PyObject_GetAttrString(cls, "_replace"));
  PyRef code = method ? PyRef::steal(PyObject_GetAttrString(method.get(), "__code__")) : PyRef();
  PyRef fields = PyRef::steal(PyObject_GetAttrString(cls, "_fields"));
  if (!code || code.get() != reference || !fields || !PyTuple_Check(fields.get()) ||
      PyTuple_GET_SIZE(fields.get()) != static_cast<Py_ssize_t>(tuple->items.size())) {
    PyErr_Clear();
    unsupported("_replace() other than namedtuple's");
  }
  std::vector<ValuePtr> items = tuple->items;
  for (const auto& [name, value] : kwargs) {
    Py_ssize_t found = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i) {
      if (name == PyUnicode_AsUTF8(PyTuple_GET_ITEM(fields.get(), i))) found = i;
    }
    if (found < 0) unsupported("_replace() of a field the named tuple does not have");
    items[static_cast<size_t>(found)] = value;
  }
  ValuePtr replaced = TracedValue::tuple(std::move(items));
  replaced->class_value = tuple->class_value;
  return replaced;
}

bool is_pure_module(const std::string& module) {
  return module == "math" || module == "cmath" || module == "operator" || module == "_operator";
}

// Immutable builtin objects whose methods are pure (str.join, int.bit_length, ...).
bool is_immutable_constant(PyObject* o) {
  return o != nullptr &&
         (PyUnicode_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyBytes_Check(o) ||
          PyRange_Check(o) || PyTuple_Check(o) || PyComplex_Check(o) || PyFrozenSet_Check(o));
}

// inspect.signature(f) of a function whose identity is guarded, or of a method bound to
// one: a constant (a Signature is immutable), computed now. Unsupported for other callables,
// whose signature may depend on state the guards do not pin.
ValuePtr signature_of(const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  if (args.size() != 1 || !kwargs.empty()) unsupported("inspect.signature() with options");
  const ValuePtr& target = args[0];
  bool bound = target->is(TracedValue::Kind::BoundMethod);
  const ValuePtr& function = bound ? target->function : target;
  if (!function->is(TracedValue::Kind::Object) || !function->source ||
      !PyFunction_Check(function->py())) {
    unsupported("inspect.signature() of a " + target->describe());
  }
  PyRef signature =
      PyRef::steal(PyObject_CallOneArg(known().inspect_signature.get(), function->py()));  // new
  if (!signature) unsupported_from_python_error("inspect.signature()");
  if (!bound) return TracedValue::constant(std::move(signature));
  // As for a bound method: the first parameter (self) dropped, unless it is *args.
  PyRef parameters = PyRef::steal(PyObject_GetAttrString(signature.get(), "parameters"));
  PyRef values =
      parameters ? PyRef::steal(PyObject_CallMethod(parameters.get(), "values", nullptr)) : PyRef();
  PyRef all = values ? PyRef::steal(PySequence_Tuple(values.get())) : PyRef();
  if (!all) unsupported_from_python_error("inspect.signature()");
  if (PyTuple_GET_SIZE(all.get()) == 0) unsupported("a bound method with no parameters");
  PyRef kind = PyRef::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(all.get(), 0), "kind"));
  PyRef kind_name = kind ? PyRef::steal(PyObject_GetAttrString(kind.get(), "name")) : PyRef();
  if (!kind_name) unsupported_from_python_error("inspect.signature()");
  if (PyUnicode_CompareWithASCIIString(kind_name.get(), "VAR_POSITIONAL") == 0) {
    unsupported("inspect.signature() of a method taking *args first");
  }
  PyRef rest = PyRef::steal(PyTuple_GetSlice(all.get(), 1, PyTuple_GET_SIZE(all.get())));
  PyRef replace = PyRef::steal(PyObject_GetAttrString(signature.get(), "replace"));
  PyRef no_args = PyRef::steal(PyTuple_New(0));
  PyRef kw = PyRef::steal(PyDict_New());
  if (!rest || !replace || !no_args || !kw ||
      PyDict_SetItemString(kw.get(), "parameters", rest.get()) < 0) {
    unsupported_from_python_error("inspect.signature()");
  }
  PyRef method_signature = PyRef::steal(PyObject_Call(replace.get(), no_args.get(), kw.get()));
  if (!method_signature) unsupported_from_python_error("inspect.signature()");
  return TracedValue::constant(std::move(method_signature));
}

ValuePtr grad_mode(bool enabled) {
  auto v = std::make_shared<TracedValue>();
  v->kind = TracedValue::Kind::GradMode;
  v->flag = enabled;
  return v;
}

// What a generator yields, as an iterator that isinstance() sees as a generator.
ValuePtr generator_of(std::vector<ValuePtr> items) {
  ValuePtr it = TracedValue::iterator(std::move(items));
  it->class_value = TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(&PyGen_Type)));
  return it;
}

ValuePtr no_op_context() {
  auto v = std::make_shared<TracedValue>();
  v->kind = TracedValue::Kind::NoOpContext;
  return v;
}

// torch.autocast(...): traced when it asks for the state autocast is in already, which
// every trace guards (AUTOCAST); a block that changes the state would change what the ops
// in it compute, which the graph does not model.
ValuePtr autocast_context(const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  for (const auto& a : args) {
    if (!a->is_constant()) unsupported("torch.autocast() with a traced argument");
  }
  for (const auto& kv : kwargs) {
    if (!kv.second->is_constant()) unsupported("torch.autocast() with a traced argument");
  }
  auto [positional, keywords] = concrete_arguments(args, kwargs);
  PyRef check =
      PyRef::steal(PyObject_GetAttrString(known().tracing.get(), "autocast_is_unchanged"));
  PyRef unchanged =
      check ? PyRef::steal(PyObject_Call(check.get(), positional.get(), keywords.get())) : PyRef();
  if (!unchanged) unsupported_from_python_error("torch.autocast()");
  if (unchanged.get() != Py_True) {
    unsupported("torch.autocast() changing the autocast state inside a graph");
  }
  return no_op_context();
}

// The callable a dynvm.compile wrapper stands for, when `object`'s class names it: the
// wrapper classes (dynvm/wrappers.py) set `__dynvm_traced_target__` to the instance
// attribute holding what they compiled (`_orig_fn`, `_orig_mod`). A compiled function or
// module called from traced code is traced as that callable, inlined into the caller's
// graph (as Dynamo inlines a torch.compile'd callee); the inner wrapper's own options do not
// apply there. The wrapper's class is guarded, and the target read through `source`. Null
// when `object` is no such wrapper.
ValuePtr dynvm_wrapper_target(TraceContext& ctx, PyObject* object, const SourcePtr& source,
                              bool module_child) {
  static PyObject* marker = PyUnicode_InternFromString("__dynvm_traced_target__");  // kept
  PyObject* name = marker != nullptr ? _PyType_Lookup(Py_TYPE(object), marker) : nullptr;
  if (name == nullptr || !PyUnicode_Check(name) || !source) return nullptr;
  ctx.guard(TraceContext::GuardKind::TypeMatch, source, object);
  PyRef target = PyRef::steal(PyObject_GetAttr(object, name));  // new
  if (!target) unsupported_from_python_error("the callable a dynvm.compile wrapper holds");
  std::string attribute = PyUnicode_AsUTF8(name);
  SourcePtr target_source =
      module_child ? Source::module_member(Source::Kind::ModuleChild, source, attribute)
                   : Source::attr(source, attribute);
  return ctx.wrap(target.get(), target_source);
}

ValuePtr call_module(TraceContext& ctx, const ValuePtr& module_value, std::vector<ValuePtr> args,
                     KwArgs kwargs) {
  PyObject* module = module_value->py();
  if (!module_value->source && !module_value->items.empty() && args.size() == 1 && kwargs.empty() &&
      module != nullptr &&
      reinterpret_cast<PyObject*>(Py_TYPE(module)) == known().sequential_type.get()) {
    // A slice of an nn.Sequential (module_slice: its children, each with its source):
    // Sequential.forward, each child called on the previous one's result. A new module
    // has no hooks of its own; each child's are guarded where it is called.
    ValuePtr value = args[0];
    for (const ValuePtr& child : module_value->items) value = call_value(ctx, child, {value}, {});
    return value;
  }
  if (!module_value->source) unsupported("calling an nn.Module made during tracing");
  ctx.guard(TraceContext::GuardKind::NoHooks, module_value->source, module);
  // Hooks change what a call does; the NoHooks guard re-checks them on every call.
  static const char* kHookDicts[] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks"};
  PyObject* dict = PyObject_GenericGetDict(module, nullptr);  // new reference
  PyRef dict_ref = PyRef::steal(dict);
  if (dict == nullptr) unsupported_from_python_error("module __dict__");
  for (const char* name : kHookDicts) {
    PyObject* hooks = PyDict_GetItemString(dict, name);  // borrowed
    if (hooks != nullptr && PyObject_Length(hooks) > 0) {
      unsupported("nn.Module hooks registered on " + std::string(Py_TYPE(module)->tp_name));
    }
  }
  if (ValuePtr wrapped = dynvm_wrapper_target(ctx, module, module_value->source, true)) {
    return call_module(ctx, wrapped, std::move(args), std::move(kwargs));
  }
  PyObject* training = PyDict_GetItemString(dict, "training");  // borrowed
  if (training != nullptr) {
    ctx.wrap(training, Source::attr(module_value->source, "training"));
  }
  PyTypeObject* type = Py_TYPE(module);
  std::string type_module = module_name_of(reinterpret_cast<PyObject*>(type));
  static PyObject* forward_name = PyUnicode_InternFromString("forward");  // kept for the process
  PyObject* forward = forward_name ? _PyType_Lookup(type, forward_name) : nullptr;  // borrowed
  PyErr_Clear();
  bool container =
      PyObject_TypeCheck(module, reinterpret_cast<PyTypeObject*>(known().sequential_type.get())) ||
      PyObject_TypeCheck(module, reinterpret_cast<PyTypeObject*>(known().module_list_type.get())) ||
      PyObject_TypeCheck(module, reinterpret_cast<PyTypeObject*>(known().module_dict_type.get()));
  std::string forward_module = forward ? module_name_of(forward) : "";
  if (!container && starts_with(forward_module, "torch.nn.modules")) {
    // A built-in leaf module (Conv2d, BatchNorm2d, MultiheadAttention, ...): one call.
    // Its Python code is not traced, so every plain attribute it may read (stride, eps,
    // momentum, training, ...) is guarded to stay equal to what it is now: by one guard for
    // the module, which passes on two compares while its __dict__ is untouched.
    if (!ctx.guards.add_module_attrs(module_value->source, module)) {
      PyObject* key;
      PyObject* value;
      Py_ssize_t pos = 0;
      while (PyDict_Next(dict, &pos, &key, &value)) {  // borrowed
        if (!PyUnicode_Check(key)) continue;
        SourcePtr attr = Source::attr(module_value->source, PyUnicode_AsUTF8(key));
        if (value == Py_None || PyBool_Check(value)) {
          (void)ctx.guards.add_id_match(attr, value);
        } else {
          (void)ctx.guards.add_constant_match(attr, value);  // an Error for non-constants
        }
      }
    }
    return ctx.bridge->call_module(module, module_value->source, args, kwargs);
  }
  if (forward == nullptr || !PyFunction_Check(forward)) {
    unsupported("calling " + std::string(type->tp_name) +
                " whose forward is not a Python function");
  }
  SourcePtr forward_source =
      Source::attr(Source::attr(module_value->source, "__class__"), "forward");
  ValuePtr forward_value = ctx.wrap(forward, forward_source);
  args.insert(args.begin(), module_value);
  return inline_function(ctx, forward_value, std::move(args), std::move(kwargs));
}

// A function written in C consumes an iterator it is given whole (str.join, set, max): a lazy
// one (a generator) among the arguments is run to its end now, and the call gets an
// iterator over what it made.
// `whole`: the function is known to take every item before doing anything else (list,
// sum), so no step runs that eager would not (drain_iterator).
void consume_lazy_arguments(TraceContext& ctx, std::vector<ValuePtr>* args, KwArgs* kwargs,
                            bool whole) {
  auto consume = [&](ValuePtr& v) {
    if (v->is(TracedValue::Kind::Iterator) && v->lazy && v->lazy->pending()) {
      v = TracedValue::iterator(drain_iterator(ctx, v, whole));
    }
  };
  for (ValuePtr& v : *args) consume(v);
  for (auto& kv : *kwargs) consume(kv.second);
}

// The items of a builtin's one iterable argument, which it takes whole (list, tuple).
std::vector<ValuePtr> iterate_all(TraceContext& ctx, const std::vector<ValuePtr>& args) {
  if (args.size() != 1) unsupported("builtin expects one iterable");
  return unpack_items(ctx, args[0]);
}

// A view of the same kind over an empty dict: its type is the view's (dict_keys, ...).
PyRef dict_view_type_probe(const TracedValue& view) {
  PyRef empty = PyRef::steal(PyDict_New());
  PyRef probe = PyRef::steal(PyObject_CallMethod(empty.get(), view.view_method(), nullptr));
  if (!probe) unsupported_from_python_error("a dict view");
  return probe;
}

ValuePtr call_builtin(TraceContext& ctx, const std::string& name, PyObject* callable,
                      std::vector<ValuePtr> args, KwArgs kwargs) {
  // Builtins that take every item of an iterable before anything else: a generator given
  // to one runs to its end now. The others take items as they go (next, zip, any: lazy
  // below) or do not iterate at all (isinstance, type, id), so a generator stays as it is.
  static const std::set<std::string> kTakesItemsWhole = {
      "list", "tuple", "set", "frozenset", "dict", "sorted", "sum", "min", "max"};
  if (kTakesItemsWhole.count(name) > 0) consume_lazy_arguments(ctx, &args, &kwargs, true);
  if (name == "len" && args.size() == 1) {
    const ValuePtr& v = args[0];
    if (v->is(TracedValue::Kind::NewObject)) {
      if (ValuePtr n = call_dunder(ctx, v, "__len__", {})) return n;
      unsupported("len() of a " + v->describe());
    }
    if (v->is_tensor()) {
      PyRef n = PyRef::steal(PyObject_CallMethod(v->py(), "size", "i", 0));
      if (!n) unsupported_from_python_error("len() of a 0-d tensor");
      return from_concrete(n.get());
    }
    if (v->is(TracedValue::Kind::Object) && v->source && !is_module(v->py())) {
      if (ValuePtr n = call_dunder(ctx, v, "__len__", {})) return n;  // a Python __len__
    }
    if (v->is(TracedValue::Kind::Object) && is_module(v->py())) {
      Py_ssize_t n = PyObject_Length(v->py());
      if (n < 0) unsupported_from_python_error("len()");
      return int_value(n);
    }
    // An iterator has no len() (eager raises TypeError).
    if (v->is(TracedValue::Kind::Iterator)) unsupported("len() of an iterator");
    return int_value(static_cast<long long>(unpack_items(ctx, v).size()));
  }
  if ((name == "isinstance" || name == "issubclass") && args.size() == 2) {
    PyRef cls = concrete_object(args[1]);
    if (!cls) unsupported(name + "() with a non-constant class");
    PyObject* type_of;
    const ValuePtr& v = args[0];
    if (name == "issubclass") {
      PyRef sub = concrete_object(v);
      if (!sub) unsupported("issubclass() of an abstract value");
      int r = PyObject_IsSubclass(sub.get(), cls.get());
      if (r < 0) unsupported_from_python_error("issubclass()");
      return bool_value(r);
    }
    if (v->is(TracedValue::Kind::NewObject)) {
      type_of = v->class_value->py();
    } else if (v->is(TracedValue::Kind::Tuple) && v->class_value) {
      type_of = v->class_value->py();
    } else if (v->is_tensor()) {
      type_of = v->tensor_type ? v->tensor_type.get() : known().tensor_type.get();
    } else if (v->is(TracedValue::Kind::Tuple)) {
      type_of = v->is_size ? known().size_type.get() : reinterpret_cast<PyObject*>(&PyTuple_Type);
      if (v->obj && !v->is_size) type_of = reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
    } else if (v->is(TracedValue::Kind::List)) {
      type_of = reinterpret_cast<PyObject*>(&PyList_Type);
    } else if (v->is(TracedValue::Kind::Dict)) {
      type_of = v->dict_class();
    } else if (v->is(TracedValue::Kind::DictView)) {
      type_of = reinterpret_cast<PyObject*>(Py_TYPE(dict_view_type_probe(*v).get()));
    } else if (v->py() != nullptr) {
      type_of = reinterpret_cast<PyObject*>(Py_TYPE(v->py()));
    } else if (v->is(TracedValue::Kind::Function)) {
      type_of = reinterpret_cast<PyObject*>(&PyFunction_Type);
    } else if (v->is(TracedValue::Kind::Iterator) && v->class_value) {
      type_of = v->class_value->py();  // a generator's (generator_of)
    } else if (v->is(TracedValue::Kind::Iterator)) {
      // Another iterator the trace made stands for one of a builtin (iter, zip, map): an
      // answer a list iterator and a generator both give is the answer (not a Tensor; an
      // Iterator), else the class asks which kind it is.
      int as_generator = PyObject_IsSubclass(reinterpret_cast<PyObject*>(&PyGen_Type), cls.get());
      int as_iterator =
          PyObject_IsSubclass(reinterpret_cast<PyObject*>(&PyListIter_Type), cls.get());
      if (as_generator < 0 || as_iterator < 0) unsupported_from_python_error("isinstance()");
      if (as_generator != as_iterator) unsupported("isinstance() of an iterator, by its kind");
      return bool_value(as_generator);
    } else {
      unsupported("isinstance() of a " + v->describe());
    }
    int r = PyObject_IsSubclass(type_of, cls.get());
    if (r < 0) unsupported_from_python_error("isinstance()");
    return bool_value(r);
  }
  if (name == "getattr" && (args.size() == 2 || args.size() == 3)) {
    PyRef attr_name = concrete_object(args[1]);
    if (!attr_name || !PyUnicode_Check(attr_name.get()))
      unsupported("getattr() with a non-constant name");
    if (args.size() == 3) {
      try {
        return load_attribute(ctx, args[0], PyUnicode_AsUTF8(attr_name.get()));
      } catch (Unsupported& stop) {
        if (raises(stop, PyExc_AttributeError)) return args[2];
        if (stop.exception) throw;  // another exception the lookup raises
        PyRef base = concrete_object(args[0]);
        if (base && !PyObject_HasAttr(base.get(), attr_name.get())) return args[2];
        throw;
      }
    }
    return load_attribute(ctx, args[0], PyUnicode_AsUTF8(attr_name.get()));
  }
  if ((name == "setattr" && args.size() == 3) || (name == "delattr" && args.size() == 2)) {
    PyRef attr_name = concrete_object(args[1]);
    if (!attr_name || !PyUnicode_Check(attr_name.get())) {
      unsupported(name + "() with a non-constant name");
    }
    if (name == "setattr") {
      store_attribute(ctx, args[0], PyUnicode_AsUTF8(attr_name.get()), args[2]);
    } else {
      delete_attribute_of(ctx, args[0], PyUnicode_AsUTF8(attr_name.get()));
    }
    return TracedValue::constant(PyRef::borrow(Py_None));
  }
  if (name == "hasattr" && args.size() == 2) {
    PyRef attr_name = concrete_object(args[1]);
    if (!attr_name) unsupported("hasattr() with a non-constant name");
    if (args[0]->is(TracedValue::Kind::Object) && args[0]->py() != nullptr &&
        PyModule_Check(args[0]->py()) && PyUnicode_Check(attr_name.get())) {
      // A global of that module the trace deleted: the live module still has it (the answer
      // below would be stale), and only eager knows what the module's __getattr__ says.
      ValuePtr written =
          ctx.global_written(PyModule_GetDict(args[0]->py()), PyUnicode_AsUTF8(attr_name.get()));
      if (written && written->is_null()) {
        unsupported("hasattr() of a module global the trace deleted");
      }
    }
    if (args[0]->is(TracedValue::Kind::Object) && args[0]->source && !is_module(args[0]->py())) {
      // Looked up as the program would, so that presence and absence are both guarded.
      try {
        load_attribute(ctx, args[0], PyUnicode_AsUTF8(attr_name.get()));
        return bool_value(true);
      } catch (Unsupported& stop) {
        if (raises(stop, PyExc_AttributeError)) return bool_value(false);
        if (stop.exception) throw;  // hasattr() lets other exceptions through
        // Not traceable: the concrete answer below, guarded by the object's type, unless the
        // answer may change without the type changing (a slot set or unset later).
        if (is_slot(reinterpret_cast<PyObject*>(Py_TYPE(args[0]->py())),
                    PyUnicode_AsUTF8(attr_name.get()))) {
          throw;
        }
      }
    }
    if (args[0]->is(TracedValue::Kind::NewObject)) {
      std::string attr = PyUnicode_AsUTF8(attr_name.get());
      if (find_attribute(args[0], attr)) return bool_value(true);
      if (is_slot(args[0]->class_value->py(), attr)) return bool_value(false);  // unset
      return bool_value(PyObject_HasAttr(args[0]->class_value->py(), attr_name.get()) == 1);
    }
    PyObject* target = args[0]->py();
    if (target == nullptr) unsupported("hasattr() on a " + args[0]->describe());
    // A tensor's type is fixed by its TENSOR_MATCH guard (and `target` is its fake).
    if (args[0]->source && !args[0]->is_tensor()) {
      ctx.guard(TraceContext::GuardKind::TypeMatch, args[0]->source, target);
    }
    int r = PyObject_HasAttr(target, attr_name.get());
    return bool_value(r == 1);
  }
  if (name == "type" && args.size() == 1) {
    const ValuePtr& v = args[0];
    if (v->is(TracedValue::Kind::NewObject)) return v->class_value;
    if (v->is(TracedValue::Kind::Tuple) && v->class_value) return v->class_value;
    if (v->is(TracedValue::Kind::Dict)) {
      return v->class_value ? v->class_value : TracedValue::object(PyRef::borrow(v->dict_class()));
    }
    if (v->is(TracedValue::Kind::DictView)) {
      PyObject* view_type = reinterpret_cast<PyObject*>(Py_TYPE(dict_view_type_probe(*v).get()));
      return TracedValue::object(PyRef::borrow(view_type));
    }
    if (v->is_tensor()) {
      return TracedValue::object(v->tensor_type ? v->tensor_type : known().tensor_type);
    }
    // An object's type is pinned by its TYPE_MATCH guard, whatever data it holds.
    PyRef o = v->is(TracedValue::Kind::Object) ? v->obj : concrete_object(v);
    if (o) return TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o.get()))));
    if (v->is(TracedValue::Kind::List))
      return TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(&PyList_Type)));
    if (v->is(TracedValue::Kind::Tuple))
      return TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(&PyTuple_Type)));
    if (v->is(TracedValue::Kind::Dict))
      return TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(&PyDict_Type)));
    unsupported("type() of a " + v->describe());
  }
  if (name == "sorted" && args.size() == 1) {
    ValuePtr key_fn;
    bool reverse = false;
    for (const auto& [k, v] : kwargs) {
      if (k == "key" && v->py() != Py_None) key_fn = v;
      if (k == "reverse") reverse = truthiness(v);
    }
    if (key_fn) {
      // sorted(items, key=f): f runs in the trace; the keys it gives must be constants.
      std::vector<ValuePtr> items = unpack_items(ctx, args[0]);
      PyRef pairs = PyRef::steal(PyList_New(0));
      for (size_t i = 0; i < items.size(); ++i) {
        PyRef key = concrete_object(call_value(ctx, key_fn, {items[i]}, {}));
        if (!key) unsupported("sorted() with a key that is not a constant");
        PyRef pair =
            PyRef::steal(Py_BuildValue("(OK)", key.get(), static_cast<unsigned long long>(i)));
        PyList_Append(pairs.get(), pair.get());
      }
      // Sorting (key, index) pairs by key alone keeps equal keys in order (stable).
      PyRef itemgetter =
          PyRef::steal(PyObject_CallMethod(known().operator_module.get(), "itemgetter", "i", 0));
      PyRef sort = PyRef::steal(PyObject_GetAttrString(pairs.get(), "sort"));
      PyRef sort_kwargs = PyRef::steal(Py_BuildValue("{s:O,s:O}", "key", itemgetter.get(),
                                                     "reverse", reverse ? Py_True : Py_False));
      PyRef empty = PyRef::steal(PyTuple_New(0));
      PyRef sorted_ok = PyRef::steal(PyObject_Call(sort.get(), empty.get(), sort_kwargs.get()));
      if (!sorted_ok) unsupported_from_python_error("sorted()");
      std::vector<ValuePtr> ordered;
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pairs.get()); ++i) {
        size_t index = PyLong_AsSize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(pairs.get(), i), 1));
        ordered.push_back(items[index]);
      }
      return TracedValue::list(std::move(ordered), true);
    }
  }
  if (name == "sorted") {
    std::vector<ValuePtr> items = unpack_items(ctx, args.at(0));
    PyRef list = PyRef::steal(PyList_New(0));
    for (const auto& i : items) {
      PyRef o = concrete_object(i);
      if (!o) unsupported("sorted() of abstract values");
      PyList_Append(list.get(), o.get());
    }
    std::vector<ValuePtr> rest(args.begin() + 1, args.end());
    rest.insert(rest.begin(), TracedValue::constant(list));
    if (!all_concrete(rest, kwargs)) unsupported("sorted() with an abstract key");
    return call_concrete(callable, rest, kwargs);
  }
  if (name == "filter" && args.size() == 2) {
    // Lazy, as filter is: the predicate runs as each item is asked for.
    return lazy_filter(ctx, args[0]->py() == Py_None ? nullptr : args[0],
                       iterator_of(ctx, args[1]));
  }
  if ((name == "pow" || name == "round" || name == "divmod") &&
      std::any_of(args.begin(), args.end(), [](const ValuePtr& a) { return a->is_tensor(); })) {
    return ctx.bridge->call(callable, args, kwargs);
  }
  if (name == "range" || name == "slice" || name == "frozenset" || name == "sorted" ||
      name == "round" || name == "divmod" || name == "pow" || name == "repr" || name == "str" ||
      name == "int" || name == "float" || name == "bool" || name == "chr" || name == "ord" ||
      name == "hash" || name == "callable" || name == "set") {
    if (name == "slice") {
      auto s = std::make_shared<TracedValue>();
      s->kind = TracedValue::Kind::Slice;
      if (args.size() == 1) args.insert(args.begin(), none_value());
      while (args.size() < 3) args.push_back(none_value());
      s->items = std::move(args);
      return s;
    }
    if ((name == "int" || name == "float" || name == "bool") && !args.empty() &&
        args[0]->is_tensor()) {
      // A tensor computed from constants alone has a value to read now, a constant too.
      PyRef folded =
          args.size() == 1 && kwargs.empty() ? ctx.bridge->folded_value(args[0]) : PyRef();
      if (!folded) unsupported("data-dependent value: " + name + "() of a tensor");
      PyRef value = PyRef::steal(PyObject_CallOneArg(callable, folded.get()));
      if (!value) unsupported_from_python_error(name + "() of a tensor");
      return TracedValue::constant(std::move(value));
    }
    if (name == "bool" && args.size() == 1) return bool_value(truth_value(ctx, args[0]));
    if (name == "callable" && args.size() == 1 && !concrete_object(args[0])) {
      return bool_value(args[0]->is(TracedValue::Kind::Function) ||
                        args[0]->is(TracedValue::Kind::BoundMethod));
    }
    if (!all_concrete(args, kwargs)) unsupported(name + "() of abstract values");
    return call_concrete(callable, args, kwargs);
  }
  if (name == "min" || name == "max" || name == "abs" || name == "sum" || name == "any" ||
      name == "all") {
    std::vector<ValuePtr> items = args;
    // sum/any/all take one iterable; min/max take an iterable or several values.
    if ((name == "any" || name == "all") && args.size() == 1 && kwargs.empty() &&
        args[0]->is(TracedValue::Kind::Iterator)) {
      // Stops at the first item that decides, as eager does: a generator runs no further.
      while (ValuePtr item = next_item(ctx, args[0])) {
        bool t = truthiness(item);
        if (t == (name == "any")) return bool_value(t);
      }
      return bool_value(name == "all");
    }
    bool takes_iterable = name == "sum" || name == "any" || name == "all" ||
                          ((name == "min" || name == "max") && args.size() == 1);
    if (takes_iterable && !args.empty()) {
      items = unpack_items(ctx, args[0]);
      // An iterator is consumed now: the builtin gets what it held.
      if (args[0]->is(TracedValue::Kind::Iterator)) args[0] = TracedValue::iterator(items);
    }
    bool any_tensor = false;
    for (const auto& i : items) any_tensor = any_tensor || i->is_tensor();
    if (!any_tensor && all_concrete(args, kwargs)) return call_concrete(callable, args, kwargs);
    if (name == "abs" && args.size() == 1) return unary_operation(ctx, "abs", args[0]);
    if (name == "sum") {
      ValuePtr acc = args.size() >= 2 ? args[1] : int_value(0);
      if (!kwargs.empty()) acc = kwargs[0].second;
      for (const auto& i : items) acc = binary_operation(ctx, 0 /* NB_ADD */, acc, i);
      return acc;
    }
    if (name == "any" || name == "all") {
      for (const auto& i : items) {
        bool t = truthiness(i);
        if (name == "any" && t) return bool_value(true);
        if (name == "all" && !t) return bool_value(false);
      }
      return bool_value(name == "all");
    }
    unsupported(name + "() over tensors");
  }
  if (name == "enumerate") {
    long long start = 0;
    if (args.size() > 1 || !kwargs.empty()) {
      PyRef s = concrete_object(args.size() > 1 ? args[1] : kwargs[0].second);
      if (!s || !PyLong_Check(s.get())) unsupported("enumerate() with a non-constant start");
      start = PyLong_AsLongLong(s.get());
    }
    // Over an iterator, items are taken from it as they are asked for (it may be a
    // generator, or be read again after a `break`).
    if (args.at(0)->is(TracedValue::Kind::Iterator)) return lazy_enumerate(ctx, args[0], start);
    std::vector<ValuePtr> items = iterate(ctx, args.at(0));
    std::vector<ValuePtr> pairs;
    for (size_t i = 0; i < items.size(); ++i) {
      pairs.push_back(TracedValue::tuple({int_value(start + static_cast<long long>(i)), items[i]}));
    }
    return TracedValue::iterator(std::move(pairs));
  }
  if (name == "zip") {
    bool over_iterator = false;
    for (const auto& a : args) over_iterator = over_iterator || a->is(TracedValue::Kind::Iterator);
    if (over_iterator && kwargs.empty()) {
      std::vector<ValuePtr> sources;
      for (const auto& a : args) sources.push_back(iterator_of(ctx, a));
      return lazy_zip(ctx, std::move(sources));
    }
    std::vector<std::vector<ValuePtr>> lists;
    size_t n = SIZE_MAX;
    for (const auto& a : args) {
      lists.push_back(iterate(ctx, a));
      n = std::min(n, lists.back().size());
    }
    if (lists.empty()) n = 0;
    std::vector<ValuePtr> tuples;
    for (size_t i = 0; i < n; ++i) {
      std::vector<ValuePtr> t;
      for (auto& l : lists) t.push_back(l[i]);
      tuples.push_back(TracedValue::tuple(std::move(t)));
    }
    return TracedValue::iterator(std::move(tuples));
  }
  if (name == "reversed") {
    // An iterator is not reversible (eager raises TypeError).
    if (!args.empty() && args[0]->is(TracedValue::Kind::Iterator))
      unsupported("reversed() of an iterator");
    std::vector<ValuePtr> items = iterate_all(ctx, args);
    return TracedValue::iterator(std::vector<ValuePtr>(items.rbegin(), items.rend()));
  }
  if (name == "iter" && args.size() == 1) return iterator_of(ctx, args[0]);
  if (name == "next" && !args.empty()) {
    ValuePtr it = args[0];
    if (!it->is(TracedValue::Kind::Iterator)) unsupported("next() of a " + it->describe());
    ValuePtr item = next_item(ctx, it);
    if (!item) {
      if (args.size() > 1) return args[1];
      unsupported("StopIteration raised by next()");
    }
    return item;
  }
  if (name == "list" || name == "tuple") {
    std::vector<ValuePtr> items = args.empty() ? std::vector<ValuePtr>{} : iterate_all(ctx, args);
    if (name == "list") return TracedValue::list(std::move(items), true);
    return TracedValue::tuple(std::move(items));
  }
  if (name == "dict") {
    std::vector<ValuePtr> keys, values;
    if (args.size() == 1) {
      if (args[0]->is(TracedValue::Kind::Dict)) {
        keys = args[0]->keys;
        values = args[0]->items;
      } else if (new_object_mapping_items(ctx, args[0], &keys, &values)) {
        // A mapping made by the trace (a dict subclass): its items.
      } else {
        for (const auto& pair : unpack_items(ctx, args[0])) {
          std::vector<ValuePtr> kv = unpack_items(ctx, pair);
          if (kv.size() != 2 || !kv[0]->is_constant()) unsupported("dict() of non-pairs");
          keys.push_back(kv[0]);
          values.push_back(kv[1]);
        }
      }
    }
    for (auto& [k, v] : kwargs) {
      keys.push_back(TracedValue::constant(PyRef::steal(PyUnicode_FromString(k.c_str()))));
      values.push_back(v);
    }
    return TracedValue::dict(std::move(keys), std::move(values), true);
  }
  if (name == "map" && args.size() >= 2) {
    // Lazy, as map is: the function runs as each item is asked for, over every iterable.
    std::vector<ValuePtr> sources;
    for (size_t i = 1; i < args.size(); ++i) sources.push_back(iterator_of(ctx, args[i]));
    return lazy_map(ctx, args[0], std::move(sources));
  }
  if (name == "id" && args.size() == 1 && kwargs.empty()) {
    // The identity of an object that existed before the call is a constant while an
    // ID_MATCH guard holds it; one the trace made is new on every call.
    const ValuePtr& v = args[0];
    if (v->source && v->obj && !v->is_tensor() && !v->mutable_here &&
        (v->is(TracedValue::Kind::Object) || v->is(TracedValue::Kind::List) ||
         v->is(TracedValue::Kind::Dict) || v->is(TracedValue::Kind::Tuple))) {
      ctx.guard(TraceContext::GuardKind::IdMatch, v->source, v->py());
      return TracedValue::constant(PyRef::steal(PyLong_FromVoidPtr(v->py())));
    }
    unsupported("id() of a " + v->describe() + (v->source ? "" : " made by the trace"));
  }
  if (name == "vars" && args.size() == 1 && kwargs.empty() &&
      (args[0]->is(TracedValue::Kind::NewObject) ||
       (args[0]->is(TracedValue::Kind::Object) && args[0]->source))) {
    // vars(obj) is obj.__dict__; an object without one (or a class's mappingproxy) is left to
    // eager.
    ValuePtr dict = load_attribute(ctx, args[0], "__dict__");
    if (!dict->is(TracedValue::Kind::Dict)) unsupported("vars() of a " + args[0]->describe());
    return dict;
  }
  if (name == "print") unsupported("print()");
  if (constructs_as_base_exception(callable) && all_concrete(args, kwargs)) {
    return call_concrete(callable, args, kwargs);  // an exception to raise: IndexError("...")
  }
  unsupported("call to builtin " + name + "()");
}

// nn.Module.parameters() and its relatives, evaluated on the real module tree with every
// dict they walk guarded, so a module added or removed later means a retrace.
ValuePtr call_module_structure_method(TraceContext& ctx, const std::string& method,
                                      const ValuePtr& self, const std::vector<ValuePtr>& args,
                                      const KwArgs& kwargs) {
  PyObject* module = self->py();
  const SourcePtr& src = self->source;
  if (!src || !all_concrete(args, kwargs)) unsupported(method + "() of a module");
  // Guard the structure of every module of the tree.
  PyRef all = PyRef::steal(PyObject_CallMethod(module, "named_modules", nullptr));
  PyRef all_list = all ? PyRef::steal(PySequence_List(all.get())) : PyRef();
  if (!all_list) unsupported_from_python_error("named_modules()");
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(all_list.get()); ++i) {
    PyObject* pair = PyList_GET_ITEM(all_list.get(), i);
    SourcePtr sub = Source::module_path(src, PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 0)),
                                        Source::Kind::ModuleChild);
    PyRef dict = PyRef::steal(PyObject_GenericGetDict(PyTuple_GET_ITEM(pair, 1), nullptr));
    if (!dict) unsupported_from_python_error("module __dict__");
    for (const char* members : {"_parameters", "_buffers", "_modules"}) {
      PyObject* d = PyDict_GetItemString(dict.get(), members);  // borrowed
      if (d != nullptr) ctx.guard(TraceContext::GuardKind::DictKeys, Source::attr(sub, members), d);
    }
  }
  PyRef fn = PyRef::steal(PyObject_GetAttrString(module, method.c_str()));
  ValuePtr result_value = call_concrete(fn.get(), args, kwargs);
  PyRef result = PyRef::steal(PySequence_List(concrete_object(result_value).get()));
  if (!result) unsupported_from_python_error(method + "()");
  bool named = method.rfind("named_", 0) == 0;
  std::string base = named ? method.substr(6) : method;
  // The names, for the unnamed variants: from the named variant with the same arguments.
  PyRef names;
  if (!named) {
    PyRef named_fn = PyRef::steal(PyObject_GetAttrString(module, ("named_" + base).c_str()));
    PyRef named_result = PyRef::steal(
        PySequence_List(concrete_object(call_concrete(named_fn.get(), args, kwargs)).get()));
    if (!named_result) unsupported_from_python_error(method + "()");
    names = named_result;
  }
  std::vector<ValuePtr> items;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(result.get()); ++i) {
    PyObject* entry = PyList_GET_ITEM(result.get(), i);
    PyObject* pair = named ? entry : PyList_GET_ITEM(names.get(), i);
    std::string dotted = PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 0));
    PyObject* object = PyTuple_GET_ITEM(pair, 1);
    SourcePtr item_src;
    if (base == "modules" || base == "children") {
      item_src = Source::module_path(src, dotted, Source::Kind::ModuleChild);
    } else {
      item_src = Source::module_path(
          src, dotted,
          base == "parameters" ? Source::Kind::ModuleParam : Source::Kind::ModuleBuffer);
    }
    ValuePtr v = dotted.empty() ? self : ctx.wrap(object, item_src);
    if (named) {
      items.push_back(
          TracedValue::tuple({TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(pair, 0))), v}));
    } else {
      items.push_back(v);
    }
  }
  return generator_of(std::move(items));
}

// Methods of lists and dicts made by (or read into) the trace.
ValuePtr call_container_method(TraceContext& ctx, const std::string& method, const ValuePtr& self,
                               std::vector<ValuePtr> args) {
  auto require_mutable = [&] {
    if (!ctx.track_mutation(self)) {
      unsupported("mutation (" + method + ") of a " + self->describe() +
                  " that existed before the call");
    }
  };
  if (self->is(TracedValue::Kind::List)) {
    if (method == "append" && args.size() == 1) {
      require_mutable();
      self->items.push_back(args[0]);
      return none_value();
    }
    if (method == "extend" && args.size() == 1) {
      require_mutable();
      for (auto& i : unpack_items(ctx, args[0])) self->items.push_back(i);
      return none_value();
    }
    if (method == "insert" && args.size() == 2) {
      require_mutable();
      PyRef idx = concrete_object(args[0]);
      long long i = idx ? PyLong_AsLongLong(idx.get()) : 0;
      long long n = static_cast<long long>(self->items.size());
      if (i < 0) i = std::max(0LL, i + n);
      i = std::min(i, n);
      self->items.insert(self->items.begin() + i, args[1]);
      return none_value();
    }
    if (method == "pop") {
      require_mutable();
      if (self->items.empty()) unsupported("pop from empty list");
      long long i = static_cast<long long>(self->items.size()) - 1;
      if (!args.empty()) {
        PyRef idx = concrete_object(args[0]);
        i = PyLong_AsLongLong(idx.get());
        if (i < 0) i += static_cast<long long>(self->items.size());
      }
      ValuePtr v = self->items.at(static_cast<size_t>(i));
      self->items.erase(self->items.begin() + i);
      return v;
    }
    if (method == "remove" && args.size() == 1) {
      // The first item that is the value or equals it, as list.remove compares (identity
      // first, then ==): concrete items compare now; a tensor compared by == would give
      // an ambiguous truth value in eager, so an item that is neither breaks.
      require_mutable();
      PyRef wanted = concrete_object(args[0]);
      for (size_t i = 0; i < self->items.size(); ++i) {
        const ValuePtr& item = self->items[i];
        bool equal = item == args[0] || (item->py() != nullptr && item->py() == args[0]->py());
        if (!equal) {
          PyRef concrete = concrete_object(item);
          if (!concrete || !wanted || !is_guardable_constant(concrete.get()) ||
              !is_guardable_constant(wanted.get())) {
            unsupported("list.remove() compares values other than constants");
          }
          int eq = PyObject_RichCompareBool(concrete.get(), wanted.get(), Py_EQ);
          if (eq < 0) unsupported_from_python_error("list.remove()");
          equal = eq == 1;
        }
        if (equal) {
          self->items.erase(self->items.begin() + static_cast<std::ptrdiff_t>(i));
          return none_value();
        }
      }
      unsupported("list.remove(x): x not in list");  // eager's ValueError
    }
    if (method == "copy") return TracedValue::list(self->items, true);
    if (method == "reverse") {
      require_mutable();
      std::reverse(self->items.begin(), self->items.end());
      return none_value();
    }
  }
  if (self->is(TracedValue::Kind::Dict)) {
    auto find = [&](const ValuePtr& key) -> int {
      PyRef k = concrete_object(key);
      if (!k) unsupported("dict lookup with an abstract key");
      for (size_t i = 0; i < self->keys.size(); ++i) {
        int eq = PyObject_RichCompareBool(self->keys[i]->py(), k.get(), Py_EQ);
        if (eq < 0) unsupported_from_python_error("dict key comparison");
        if (eq) return static_cast<int>(i);
      }
      return -1;
    };
    // Views are live: they read the dict when used, not when made.
    if (method == "keys" && args.empty()) {
      return TracedValue::dict_view(self, TracedValue::ViewOf::Keys);
    }
    if (method == "values" && args.empty()) {
      return TracedValue::dict_view(self, TracedValue::ViewOf::Values);
    }
    if (method == "items" && args.empty()) {
      return TracedValue::dict_view(self, TracedValue::ViewOf::Items);
    }
    if (method == "get" && !args.empty()) {
      int i = find(args[0]);
      if (i >= 0) return self->items[static_cast<size_t>(i)];
      return args.size() > 1 ? args[1] : none_value();
    }
    if (method == "copy") {
      ValuePtr copy = TracedValue::dict(self->keys, self->items, true);
      if (self->dict_class() != reinterpret_cast<PyObject*>(&PyDict_Type)) {
        copy->class_value = TracedValue::object(PyRef::borrow(self->dict_class()));
      }
      return copy;
    }
    bool ordered = PyObject_IsSubclass(self->dict_class(), known().ordered_dict_type.get()) == 1;
    if (method == "popitem" && (args.empty() || ordered)) {
      // dict.popitem() takes the last item; OrderedDict.popitem(last=False) the first.
      bool last = true;
      if (!args.empty()) last = truthiness(args[0]);
      if (self->keys.empty()) unsupported("KeyError in popitem() of an empty dict");
      require_mutable();
      size_t i = last ? self->keys.size() - 1 : 0;
      ValuePtr pair = TracedValue::tuple({self->keys[i], self->items[i]});
      self->keys.erase(self->keys.begin() + static_cast<std::ptrdiff_t>(i));
      self->items.erase(self->items.begin() + static_cast<std::ptrdiff_t>(i));
      return pair;
    }
    if (method == "move_to_end" && ordered && !args.empty()) {
      bool last = true;
      if (args.size() > 1) last = truthiness(args[1]);
      int i = find(args[0]);
      if (i < 0) unsupported("KeyError in move_to_end()");
      require_mutable();
      ValuePtr key = self->keys[static_cast<size_t>(i)];
      ValuePtr value = self->items[static_cast<size_t>(i)];
      self->keys.erase(self->keys.begin() + i);
      self->items.erase(self->items.begin() + i);
      self->keys.insert(last ? self->keys.end() : self->keys.begin(), key);
      self->items.insert(last ? self->items.end() : self->items.begin(), value);
      return none_value();
    }
    if (method == "update" && args.size() == 1 && args[0]->is(TracedValue::Kind::Dict)) {
      require_mutable();
      for (size_t j = 0; j < args[0]->keys.size(); ++j) {
        int i = find(args[0]->keys[j]);
        if (i >= 0) {
          self->items[static_cast<size_t>(i)] = args[0]->items[j];
        } else {
          self->keys.push_back(args[0]->keys[j]);
          self->items.push_back(args[0]->items[j]);
        }
      }
      return none_value();
    }
    if (method == "pop" && !args.empty()) {
      require_mutable();
      int i = find(args[0]);
      if (i < 0) {
        if (args.size() > 1) return args[1];
        unsupported("KeyError in dict.pop");
      }
      ValuePtr v = self->items[static_cast<size_t>(i)];
      self->keys.erase(self->keys.begin() + i);
      self->items.erase(self->items.begin() + i);
      return v;
    }
    if (method == "setdefault" && !args.empty()) {
      int i = find(args[0]);
      if (i >= 0) return self->items[static_cast<size_t>(i)];
      require_mutable();
      self->keys.push_back(args[0]);
      self->items.push_back(args.size() > 1 ? args[1] : none_value());
      return self->items.back();
    }
  }
  if (self->is_constant() && self->mutable_here && self->py() != nullptr &&
      PyAnySet_Check(self->py())) {
    // A set the trace made: its methods run on the real set object.
    if (!all_concrete(args, {})) unsupported("a set of abstract values");
    PyRef fn = PyRef::steal(PyObject_GetAttrString(self->py(), method.c_str()));
    if (!fn) unsupported_from_python_error("set." + method);
    return call_concrete(fn.get(), args, {});
  }
  if (self->is(TracedValue::Kind::List) && method == "sort") {
    require_mutable();
    PyRef list = concrete_object(self);
    if (!list) unsupported("sorting a list of abstract values");
    KwArgs none;
    ValuePtr sorted = call_concrete(PyDict_GetItemString(known().builtins.get(), "sorted"),
                                    {TracedValue::constant(list)}, none);
    self->items = sorted->items;
    return none_value();
  }
  if (self->is_size && method == "numel") {
    long long n = 1;
    for (const auto& i : self->items) n *= PyLong_AsLongLong(i->py());
    return int_value(n);
  }
  if (self->is(TracedValue::Kind::Tuple) || self->is(TracedValue::Kind::List)) {
    if (method == "index" || method == "count") {
      PyRef seq = concrete_object(self);
      if (!seq || !all_concrete(args, {})) unsupported(method + "() on abstract values");
      PyRef fn = PyRef::steal(PyObject_GetAttrString(seq.get(), method.c_str()));
      return call_concrete(fn.get(), args, {});
    }
  }
  unsupported("method " + method + "() of a " + self->describe());
}

}  // namespace

ValuePtr inline_function(TraceContext& ctx, const ValuePtr& function, std::vector<ValuePtr> args,
                         KwArgs kwargs) {
  if (ctx.inline_depth >= ctx.options.max_inline_depth) {
    unsupported("calls nested deeper than " + std::to_string(ctx.options.max_inline_depth));
  }
  // Values made from here on belong to this call (its *args and **kwargs too).
  const uint64_t call_start = TracedValue::peek_serial();
  std::shared_ptr<const frontend::CodeInfo> code;
  PyRef code_object;
  GlobalsScope scope;
  std::vector<ValuePtr> defaults;
  std::vector<std::pair<std::string, ValuePtr>> kwdefaults;
  std::vector<ValuePtr> free_cells;
  std::string qualname;

  if (function->is(TracedValue::Kind::Function)) {
    code = function->code;
    code_object = function->code_object;
    scope.globals = function->globals;
    scope.builtins = ctx.builtins;
    scope.dict_source = function->source;
    if (function->defaults) defaults = function->defaults->items;
    if (function->kwdefaults) {
      for (size_t i = 0; i < function->kwdefaults->keys.size(); ++i) {
        kwdefaults.emplace_back(PyUnicode_AsUTF8(function->kwdefaults->keys[i]->py()),
                                function->kwdefaults->items[i]);
      }
    }
    if (function->closure) free_cells = function->closure->items;
    qualname = function->qualname;
  } else {
    PyObject* fn = function->py();
    if (fn == nullptr || !PyFunction_Check(fn)) unsupported("inlining a non-function");
    const SourcePtr& src = function->source;
    if (!src) unsupported("calling a function the trace cannot guard");
    auto* f = reinterpret_cast<PyFunctionObject*>(fn);
    code_object = PyRef::borrow(f->func_code);
    code = ctx.code_info(f->func_code);
    scope.globals = PyRef::borrow(f->func_globals);
    scope.builtins = ctx.builtins;
    if (f->func_globals != ctx.root_globals.get()) {
      scope.dict_source = Source::attr(src, "__globals__");
      PyObject* b = PyDict_GetItemString(f->func_globals, "__builtins__");  // borrowed
      PyObject* bdict = (b != nullptr && PyModule_Check(b)) ? PyModule_GetDict(b) : b;
      if (bdict != ctx.builtins.get()) unsupported("a function with its own builtins");
    }
    if (f->func_defaults != nullptr) {
      SourcePtr dsrc = Source::attr(src, "__defaults__");
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f->func_defaults); ++i) {
        defaults.push_back(ctx.wrap(PyTuple_GET_ITEM(f->func_defaults, i), Source::item(dsrc, i)));
      }
    }
    if (f->func_kwdefaults != nullptr) {
      SourcePtr ksrc = Source::attr(src, "__kwdefaults__");
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      while (PyDict_Next(f->func_kwdefaults, &pos, &k, &v)) {
        kwdefaults.emplace_back(PyUnicode_AsUTF8(k),
                                ctx.wrap(v, Source::key(ksrc, PyUnicode_AsUTF8(k))));
      }
    }
    if (f->func_closure != nullptr) {
      SourcePtr csrc = Source::attr(src, "__closure__");
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f->func_closure); ++i) {
        PyObject* cell = PyTuple_GET_ITEM(f->func_closure, i);
        PyObject* contents = PyCell_GET(cell);  // borrowed
        ValuePtr v = contents == nullptr
                         ? TracedValue::null()
                         : ctx.wrap(contents, Source::attr(Source::item(csrc, i), "cell_contents"));
        ValuePtr c = TracedValue::cell(v);
        c->mutable_here = false;
        free_cells.push_back(c);
      }
    }
    qualname = code->qualname;
  }
  if (code->is_coroutine() || code->is_async_generator()) {
    unsupported("calling the coroutine function " + qualname);
  }

  auto owned_frame = std::make_unique<InlineFrame>(ctx, code, code_object, scope);
  InlineFrame& frame = *owned_frame;
  // Bind arguments as CPython does.
  const int npos = code->argcount;
  const int nkwonly = code->kwonlyargcount;
  const size_t total = static_cast<size_t>(code->total_argcount());
  std::vector<ValuePtr> bound(total, nullptr);
  std::vector<ValuePtr> extra_positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) < npos) {
      bound[i] = args[i];
    } else if (code->has_varargs()) {
      extra_positional.push_back(args[i]);
    } else {
      unsupported(qualname + "() takes " + std::to_string(npos) + " positional arguments but " +
                  std::to_string(args.size()) + " were given");
    }
  }
  std::vector<ValuePtr> extra_keys, extra_values;
  for (auto& [name, value] : kwargs) {
    int slot = -1;
    for (int i = code->posonlyargcount; i < npos + nkwonly; ++i) {
      if (code->localsplus[static_cast<size_t>(i)].name == name) slot = i;
    }
    if (slot >= 0) {
      if (bound[static_cast<size_t>(slot)])
        unsupported(qualname + "() got multiple values for " + name);
      bound[static_cast<size_t>(slot)] = value;
    } else if (code->has_varkeywords()) {
      extra_keys.push_back(TracedValue::constant(PyRef::steal(PyUnicode_FromString(name.c_str()))));
      extra_values.push_back(value);
    } else {
      unsupported(qualname + "() got an unexpected keyword argument '" + name + "'");
    }
  }
  // Defaults fill the last positional parameters.
  for (int i = 0; i < npos; ++i) {
    if (bound[static_cast<size_t>(i)]) continue;
    int d = i - (npos - static_cast<int>(defaults.size()));
    if (d < 0) unsupported(qualname + "() missing a required positional argument");
    bound[static_cast<size_t>(i)] = defaults[static_cast<size_t>(d)];
  }
  for (int i = npos; i < npos + nkwonly; ++i) {
    if (bound[static_cast<size_t>(i)]) continue;
    const std::string& pname = code->localsplus[static_cast<size_t>(i)].name;
    for (auto& [k, v] : kwdefaults) {
      if (k == pname) bound[static_cast<size_t>(i)] = v;
    }
    if (!bound[static_cast<size_t>(i)])
      unsupported(qualname + "() missing keyword argument " + pname);
  }
  size_t next = static_cast<size_t>(npos + nkwonly);
  if (code->has_varargs()) bound[next++] = TracedValue::tuple(std::move(extra_positional));
  if (code->has_varkeywords()) {
    bound[next++] = TracedValue::dict(std::move(extra_keys), std::move(extra_values), true);
  }
  for (size_t i = 0; i < total; ++i) frame.locals[i] = bound[i];
  // Free variables occupy the last slots.
  size_t nfree = code->freevars.size();
  if (nfree != free_cells.size()) unsupported("internal: closure size mismatch");
  for (size_t i = 0; i < nfree; ++i) {
    frame.locals[static_cast<size_t>(code->freevars[i])] = free_cells[i];
  }
  ++ctx.inline_depth;
  struct DepthGuard {
    TraceContext& c;
    ~DepthGuard() { --c.inline_depth; }
  } depth_guard{ctx};
  if (code->is_generator()) {
    // Its body runs when its items are asked for, one yield at a time (lazy_items.h).
    return generator_iterator(ctx, std::move(owned_frame), call_start);
  }
  return frame.run();
}

ValuePtr call_value(TraceContext& ctx, const ValuePtr& callable, std::vector<ValuePtr> args,
                    KwArgs kwargs) {
  switch (callable->kind) {
    case TracedValue::Kind::BoundMethod: {
      if (callable->function->is(TracedValue::Kind::Constant) &&
          callable->function->py() != nullptr && PyUnicode_Check(callable->function->py())) {
        // A method the VM evaluates itself: function holds the method's name.
        std::string method = PyUnicode_AsUTF8(callable->function->py());
        if (method.rfind("module:", 0) == 0) {
          return call_module_structure_method(ctx, method.substr(7), callable->self_value, args,
                                              kwargs);
        }
        if (kwargs.size() == 1 && kwargs[0].first == "last" &&
            ((method == "move_to_end" && args.size() == 1) ||
             (method == "popitem" && args.empty()))) {
          args.push_back(kwargs[0].second);  // OrderedDict's one keyword, passed by position
          kwargs.clear();
        }
        if (method == "_replace" && args.empty()) {
          return replaced_named_tuple(callable->self_value, kwargs);
        }
        if (!kwargs.empty()) {
          if (method != "update" || !args.empty()) {
            unsupported("keyword arguments to " + method + "()");
          }
          std::vector<ValuePtr> keys, values;
          for (auto& [k, v] : kwargs) {
            keys.push_back(TracedValue::constant(PyRef::steal(PyUnicode_FromString(k.c_str()))));
            values.push_back(v);
          }
          args.push_back(TracedValue::dict(std::move(keys), std::move(values), true));
        }
        return call_container_method(ctx, method, callable->self_value, std::move(args));
      }
      args.insert(args.begin(), callable->self_value);
      return call_value(ctx, callable->function, std::move(args), std::move(kwargs));
    }
    case TracedValue::Kind::Function:
      return inline_function(ctx, callable, std::move(args), std::move(kwargs));
    case TracedValue::Kind::GradModeExit:
      ctx.grad_enabled = callable->flag;
      return none_value();
    case TracedValue::Kind::NewObject: {
      ValuePtr result = call_dunder(ctx, callable, "__call__", std::move(args));
      if (!result || !kwargs.empty()) unsupported("calling a " + callable->describe());
      return result;
    }
    case TracedValue::Kind::Partial: {
      std::vector<ValuePtr> all = callable->items;
      for (auto& a : args) all.push_back(a);
      KwArgs all_kwargs;
      if (callable->kwdefaults) {
        for (size_t i = 0; i < callable->kwdefaults->keys.size(); ++i) {
          all_kwargs.emplace_back(PyUnicode_AsUTF8(callable->kwdefaults->keys[i]->py()),
                                  callable->kwdefaults->items[i]);
        }
      }
      for (auto& kv : kwargs) all_kwargs.push_back(kv);
      return call_value(ctx, callable->function, std::move(all), std::move(all_kwargs));
    }
    case TracedValue::Kind::Object:
      break;
    default:
      unsupported("calling a " + callable->describe());
  }
  PyObject* fn = callable->py();
  const KnownObjects& k = known();
  if (fn == k.no_grad.get()) return grad_mode(false);
  if (fn == k.enable_grad.get()) return grad_mode(true);
  if (fn == k.inference_mode.get()) {
    bool mode = true;
    if (!args.empty()) mode = truthiness(args[0]);
    return grad_mode(!mode);
  }
  if (fn == k.autocast.get()) return autocast_context(args, kwargs);
  // A profiler range names a region for torch.profiler; the compiled graph has no such
  // regions (torch.compile drops them too), so entering one changes nothing traced.
  if (fn == k.record_function.get()) return no_op_context();
  if (fn == k.unchanged_exit.get()) return bool_value(false);
  if (fn == k.set_grad_enabled.get()) {
    if (args.size() != 1) unsupported("set_grad_enabled() arguments");
    bool previous = ctx.grad_enabled;
    ctx.grad_enabled = truthiness(args[0]);
    ValuePtr mode = grad_mode(ctx.grad_enabled);
    mode->items = {bool_value(previous)};
    return mode;
  }
  if (fn == k.inspect_signature.get()) return signature_of(args, kwargs);
  if (is_dynamo_module_tagging(fn)) return none_value();
  if ((fn == k.copy_copy.get() || fn == k.copy_deepcopy.get()) && args.size() == 1 &&
      kwargs.empty()) {
    return copy_value(ctx, args[0], fn == k.copy_deepcopy.get());
  }
  if (fn == k.is_grad_enabled.get()) {
    // The trace already guards the grad mode it started under; inside the function the
    // mode only changes through traced context managers.
    return bool_value(ctx.grad_enabled);
  }
  if (fn == k.jit_is_scripting.get() || fn == k.jit_is_tracing.get()) return bool_value(false);
  if (fn == k.is_exporting.get()) return bool_value(false);
  if (is_compiling_flag(fn)) return bool_value(true);
  if (is_module(fn)) return call_module(ctx, callable, std::move(args), std::move(kwargs));
  if (PyType_Check(fn)) {
    auto* type = reinterpret_cast<PyTypeObject*>(fn);
    std::string qualified = type->tp_name;
    if (PyType_IsSubtype(type, &PyTuple_Type) && PyObject_HasAttrString(fn, "_fields")) {
      return make_named_tuple(ctx, callable, args, kwargs);
    }
    if (qualified == "collections.defaultdict") {
      // A dict that calls `factory` for a missing key (subscript() inserts what it made).
      ValuePtr factory = args.empty() ? TracedValue::constant(PyRef::borrow(Py_None)) : args[0];
      if (!args.empty()) args.erase(args.begin());
      ValuePtr made = call_builtin(ctx, "dict", fn, std::move(args), std::move(kwargs));
      made->class_value = callable;
      made->function = factory;
      return made;
    }
    if (qualified == "collections.OrderedDict") {
      ValuePtr made = call_builtin(ctx, "dict", fn, std::move(args), std::move(kwargs));
      made->class_value = callable;  // an OrderedDict, not a dict: isinstance, type, rebuild
      return made;
    }
    if (qualified == "functools.partial") {
      if (args.empty()) unsupported("functools.partial() without a function");
      auto p = std::make_shared<TracedValue>();
      p->kind = TracedValue::Kind::Partial;
      p->function = args[0];
      p->items.assign(args.begin() + 1, args.end());
      std::vector<ValuePtr> keys, values;
      for (auto& [name, value] : kwargs) {
        keys.push_back(TracedValue::constant(PyRef::steal(PyUnicode_FromString(name.c_str()))));
        values.push_back(value);
      }
      p->kwdefaults = TracedValue::dict(std::move(keys), std::move(values), true);
      return p;
    }
    if (qualified == "itertools.chain" && kwargs.empty()) {
      // Lazy, as chain is: each iterable is read when the one before it ends.
      std::vector<ValuePtr> sources;
      for (const auto& a : args) sources.push_back(iterator_of(ctx, a));
      return lazy_chain(ctx, std::move(sources));
    }
    if (qualified == "itertools.product") {
      std::vector<std::vector<ValuePtr>> lists;
      for (const auto& a : args) lists.push_back(iterate(ctx, a));
      std::vector<ValuePtr> out;
      if (!kwargs.empty()) unsupported("itertools.product(repeat=...)");
      std::vector<std::vector<ValuePtr>> acc = {{}};
      for (auto& l : lists) {
        std::vector<std::vector<ValuePtr>> next;
        for (auto& prefix : acc) {
          for (auto& item : l) {
            auto t = prefix;
            t.push_back(item);
            next.push_back(std::move(t));
          }
        }
        acc = std::move(next);
        if (acc.size() > 100000) unsupported("a very large itertools.product");
      }
      for (auto& t : acc) out.push_back(TracedValue::tuple(std::move(t)));
      return TracedValue::iterator(std::move(out));
    }
    if (is_traceable_user_class(fn)) {
      return new_object(ctx, callable, std::move(args), std::move(kwargs));
    }
    if (fn == k.size_type.get() && args.size() == 1) {
      ValuePtr t = TracedValue::tuple(unpack_items(ctx, args[0]));
      t->is_size = true;
      return t;
    }
    PyObject* b = k.builtins.get();
    PyObject* builtin_named = nullptr;
    const char* type_name = reinterpret_cast<PyTypeObject*>(fn)->tp_name;
    builtin_named = PyDict_GetItemString(b, type_name);  // borrowed
    if (builtin_named == fn) {
      return call_builtin(ctx, type_name, fn, std::move(args), std::move(kwargs));
    }
    // torch.device(...), torch.finfo(dtype), torch.iinfo(dtype): value objects of torch.
    std::string type_module = module_name_of(fn);
    if ((type_module == "torch" || fn == k.device_type.get()) && all_concrete(args, kwargs) &&
        (fn == k.device_type.get() || std::string(type_name) == "torch.finfo" ||
         std::string(type_name) == "torch.iinfo" || std::string(type_name) == "finfo" ||
         std::string(type_name) == "iinfo")) {
      return call_concrete(fn, args, kwargs);
    }
    if (constructs_as_base_exception(fn) && all_concrete(args, kwargs)) {
      return call_concrete(fn, args, kwargs);  // an exception of Python code, to raise
    }
    if (operator_getter_kind(fn) != OperatorGetter::None && kwargs.empty() &&
        all_concrete(args, kwargs)) {
      return call_concrete(fn, args, kwargs);  // operator.itemgetter(1), attrgetter("a.b")
    }
    unsupported("creating an instance of " + std::string(type_name));
  }
  if (PyCFunction_Check(fn)) {
    PyObject* self = PyCFunction_GET_SELF(fn);  // borrowed
    std::string module = module_name_of(fn);
    if (self != nullptr && PyModule_Check(self) &&
        std::string(PyModule_GetName(self)) == "builtins") {
      return call_builtin(ctx, name_of(fn), fn, std::move(args), std::move(kwargs));
    }
    if (module == "_functools" && name_of(fn) == "reduce" && args.size() >= 2) {
      // Each item is taken as the function is about to get it, as reduce does.
      ValuePtr items = iterator_of(ctx, args[1]);
      ValuePtr acc = args.size() > 2 ? args[2] : next_item(ctx, items);
      if (!acc) unsupported("reduce() of an empty sequence");
      while (ValuePtr item = next_item(ctx, items)) acc = call_value(ctx, args[0], {acc, item}, {});
      return acc;
    }
    // str.join and bytes.join make a sequence of every item before they join any.
    const char* method = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
    bool takes_whole = self != nullptr &&
                       (PyUnicode_CheckExact(self) || PyBytes_CheckExact(self)) &&
                       std::strcmp(method, "join") == 0;
    consume_lazy_arguments(ctx, &args, &kwargs, takes_whole);
    if (is_pure_module(module) ||
        (self != nullptr && PyModule_Check(self) && is_pure_module(PyModule_GetName(self)))) {
      if (all_concrete(args, kwargs)) return call_concrete(fn, args, kwargs);
      return ctx.bridge->call(fn, args, kwargs);  // e.g. operator.add(tensor, 1)
    }
    if (self != nullptr && is_immutable_constant(self) && all_concrete(args, kwargs)) {
      return call_concrete(fn, args, kwargs);
    }
  }
  if (fn == known().mapping_get.get() && (args.size() == 2 || args.size() == 3) && kwargs.empty()) {
    // collections.abc.Mapping.get: self[key], or the default on a KeyError.
    try {
      return subscript(ctx, args[0], args[1]);
    } catch (Unsupported& stop) {
      if (!raises(stop, PyExc_KeyError)) throw;
      return args.size() == 3 ? args[2] : none_value();
    }
  }
  if (fn == known().object_getattribute.get() && args.size() == 2 && kwargs.empty() &&
      args[0]->is(TracedValue::Kind::Object) && args[1]->is_constant() &&
      PyUnicode_Check(args[1]->py())) {
    // The end of a class's own __getattribute__ (super().__getattribute__(name)).
    return generic_object_attribute(ctx, args[0], PyUnicode_AsUTF8(args[1]->py()));
  }
  if (ValuePtr result = call_builtin_base_method(ctx, fn, args, kwargs)) return result;
  if (is_torch_callable(fn)) return ctx.bridge->call(fn, args, kwargs);
  if (PyWeakref_CheckRef(fn) && args.empty() && kwargs.empty() && callable->source) {
    // A weak reference called (an LR scheduler's wrapper of optimizer.step): its target,
    // read through the reference on every call (None once the target is gone).
    PyRef target = PyRef::steal(PyObject_CallNoArgs(fn));
    if (!target) unsupported_from_python_error("calling a weak reference");
    return ctx.wrap(target.get(), Source::weakref_target(callable->source));
  }
  if (name_of(fn) == "function.__get__" && kwargs.empty()) {
    // function.__get__(obj, type) (an LR scheduler's wrapper binds optimizer.step so): the
    // function bound to obj, as an attribute lookup binds it. The slot itself takes the
    // function first; the method-wrapper of one function has it as __self__.
    ValuePtr function;
    if (Py_TYPE(fn) == &PyWrapperDescr_Type && !args.empty()) {
      function = args[0];
      args.erase(args.begin());
    } else if (callable->source) {
      PyRef self = PyRef::steal(PyObject_GetAttrString(fn, "__self__"));
      if (!self) unsupported_from_python_error("function.__get__");
      function = ctx.wrap(self.get(), Source::attr(callable->source, "__self__"));
    }
    bool is_function =
        function && (function->is(TracedValue::Kind::Function) ||
                     (function->is(TracedValue::Kind::Object) && PyFunction_Check(function->py())));
    if (is_function && (args.size() == 1 || args.size() == 2) &&
        !(args[0]->is_constant() && args[0]->py() == Py_None)) {
      auto method = std::make_shared<TracedValue>();
      method->kind = TracedValue::Kind::BoundMethod;
      method->self_value = args[0];
      method->function = function;
      return method;
    }
    unsupported("function.__get__ with these arguments");
  }
  if (is_device_properties_query(fn) && all_concrete(args, kwargs)) {
    return call_concrete(fn, args, kwargs);
  }
  if (operator_getter_kind(reinterpret_cast<PyObject*>(Py_TYPE(fn))) != OperatorGetter::None &&
      args.size() == 1 && kwargs.empty()) {
    return call_operator_getter(ctx, fn, args[0]);
  }
  if (callable->source && marked_constant(fn) && all_concrete(args, kwargs)) {
    // torch._dynamo.assume_constant_result (transformers' install probes): its answer is
    // fixed for the process, so it is called now and its result kept as a constant.
    return call_concrete(fn, args, kwargs);
  }
  if (ValuePtr result = defer_logging_call(ctx, callable, args, kwargs)) return result;
  if (ValuePtr result = defer_warning_call(ctx, callable, args, kwargs)) return result;
  if (callable->source && std::strcmp(Py_TYPE(fn)->tp_name, "functools._lru_cache_wrapper") == 0) {
    // functools.lru_cache: the function it wraps runs, the cache not consulted, which
    // gives eager's result only for a pure function. One that changes anything existing
    // (transformers' `warning_once` records what it said) breaks the graph there and runs
    // with its cache, so its effects happen as often as in eager.
    PyRef wrapped = PyRef::steal(PyObject_GetAttrString(fn, "__wrapped__"));
    if (!wrapped) unsupported_from_python_error("an lru_cache wrapper");
    size_t effects = ctx.side_effects.size();
    size_t mutations = ctx.container_mutations;
    ValuePtr result = call_value(
        ctx, ctx.wrap(wrapped.get(), Source::attr(callable->source, "__wrapped__")), args, kwargs);
    if (ctx.container_mutations == mutations &&
        defer_cached_logging_call(ctx, callable, args, kwargs, effects, result)) {
      return result;
    }
    if (ctx.side_effects.size() != effects || ctx.container_mutations != mutations) {
      unsupported(
          "an lru_cache-wrapped function with side effects (its cache decides whether "
          "they happen)");
    }
    return result;
  }
  if (ValuePtr result = call_autograd_function(ctx, callable, args, kwargs)) return result;
  if (PyFunction_Check(fn))
    return inline_function(ctx, callable, std::move(args), std::move(kwargs));
  if (PyMethod_Check(fn)) {
    PyObject* self = PyMethod_GET_SELF(fn);
    PyObject* func = PyMethod_GET_FUNCTION(fn);
    if (!callable->source) unsupported("calling a bound method with no source");
    ValuePtr self_value = ctx.wrap(self, Source::attr(callable->source, "__self__"));
    ValuePtr func_value = ctx.wrap(func, Source::attr(callable->source, "__func__"));
    args.insert(args.begin(), self_value);
    return call_value(ctx, func_value, std::move(args), std::move(kwargs));
  }
  if (callable->source && std::strcmp(Py_TYPE(fn)->tp_name, "functools.partial") == 0) {
    // A partial that existed before the call (an activation built with
    // functools.partial(F.gelu, approximate="tanh")): its parts are read and guarded.
    ValuePtr func = ctx.wrap(PyRef::steal(PyObject_GetAttrString(fn, "func")).get(),
                             Source::attr(callable->source, "func"));
    PyRef bound_args = PyRef::steal(PyObject_GetAttrString(fn, "args"));
    PyRef keywords = PyRef::steal(PyObject_GetAttrString(fn, "keywords"));
    if (!bound_args || !keywords || !PyTuple_Check(bound_args.get()) ||
        !PyDict_Check(keywords.get())) {
      unsupported_from_python_error("a functools.partial object");
    }
    std::vector<ValuePtr> all =
        iterate(ctx, ctx.wrap(bound_args.get(), Source::attr(callable->source, "args")));
    all.insert(all.end(), args.begin(), args.end());
    ValuePtr bound_keywords = ctx.wrap(keywords.get(), Source::attr(callable->source, "keywords"));
    KwArgs all_kwargs;
    for (size_t i = 0; i < bound_keywords->keys.size(); ++i) {
      all_kwargs.emplace_back(PyUnicode_AsUTF8(bound_keywords->keys[i]->py()),
                              bound_keywords->items[i]);
    }
    for (auto& [key, value] : kwargs) {
      auto same = std::find_if(all_kwargs.begin(), all_kwargs.end(),
                               [&key = key](const auto& kv) { return kv.first == key; });
      if (same != all_kwargs.end()) {
        same->second = value;  // the call's keywords override the partial's
      } else {
        all_kwargs.emplace_back(key, value);
      }
    }
    return call_value(ctx, func, std::move(all), std::move(all_kwargs));
  }
  if (callable->is(TracedValue::Kind::Object) && !PyType_Check(fn)) {
    if (ValuePtr wrapped = dynvm_wrapper_target(ctx, fn, callable->source, false)) {
      return call_value(ctx, wrapped, std::move(args), std::move(kwargs));
    }
  }
  if (callable->source && callable->is(TracedValue::Kind::Object) && !PyType_Check(fn)) {
    // An instance of a class whose __call__ is Python code (torchvision's LevelMapper): the
    // call is type(obj).__call__(obj, ...), read through the guarded class.
    static PyObject* call_name = PyUnicode_InternFromString("__call__");  // kept for the process
    PyObject* call = call_name ? _PyType_Lookup(Py_TYPE(fn), call_name) : nullptr;  // borrowed
    if (call != nullptr && PyFunction_Check(call)) {
      SourcePtr type_source = Source::attr(callable->source, "__class__");
      ValuePtr method = ctx.wrap(call, Source::attr(type_source, "__call__"));
      args.insert(args.begin(), callable);
      return call_value(ctx, method, std::move(args), std::move(kwargs));
    }
  }
  unsupported("call to " + name_of(fn));
}

}  // namespace dynvm::vm
