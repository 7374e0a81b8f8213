// TraceContext: wrapping live objects into traced values (with their guards), the
// guard list, the code cache, and the helpers that decide truthiness and concreteness.
#include "trace_context.h"

#include <utility>

#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/live_code.h"
#include "dynvm/vm/code_extra.h"
#include "dynvm/vm/source_resolver.h"
#include "known_objects.h"
#include "lazy_items.h"
#include "python_values.h"
#include "torch_bridge.h"
#include "user_objects.h"

namespace dynvm::vm {

void unsupported(std::string reason) {
  Unsupported stop;
  stop.reason = std::move(reason);
  throw stop;
}

void attribute_missing(const std::string& type_name, const std::string& name) {
  AttributeMissing missing;
  missing.reason = "'" + type_name + "' object has no attribute '" + name + "'";
  missing.exception =
      PyRef::steal(PyObject_CallFunction(PyExc_AttributeError, "s", missing.reason.c_str()));
  if (missing.exception) {
    PyRef attribute = PyRef::steal(PyUnicode_FromString(name.c_str()));
    if (PyObject_SetAttrString(missing.exception.get(), "name", attribute.get()) < 0) {
      missing.exception = PyRef();
    }
  }
  if (!missing.exception) PyErr_Clear();
  throw missing;
}

void key_missing(PyObject* key) {
  KeyMissing missing;
  missing.reason = "KeyError: " + repr_text(key);
  missing.exception = PyRef::steal(PyObject_CallOneArg(PyExc_KeyError, key));
  if (!missing.exception) PyErr_Clear();
  throw missing;
}

bool raises(const Unsupported& stop, PyObject* type) {
  return stop.exception && PyErr_GivenExceptionMatches(stop.exception.get(), type) != 0;
}

void raise_python_error(const std::string& what) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  if (type == nullptr) unsupported(what);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback != nullptr && value != nullptr) PyException_SetTraceback(value, traceback);
  PyRef exception = PyRef::steal(value);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  Unsupported raised;
  PyRef text = exception ? PyRef::steal(PyObject_Str(exception.get())) : PyRef();
  if (!text) PyErr_Clear();
  raised.reason = what + ": " +
                  (exception ? std::string(Py_TYPE(exception.get())->tp_name) : "error") +
                  (text && PyUnicode_Check(text.get()) && PyUnicode_GetLength(text.get()) > 0
                       ? std::string(": ") + PyUnicode_AsUTF8(text.get())
                       : std::string());
  raised.exception = std::move(exception);
  throw raised;
}

void unsupported_from_python_error(const std::string& what) {
  std::string error = take_error_text();  // clears it
  unsupported(error.empty() ? what : what + ": " + error);
}

TraceContext::TraceContext(const TraceOptions& opts) : options(opts) {
  bridge = std::make_unique<TorchBridge>(*this);
}

TraceContext::~TraceContext() = default;

void TraceContext::guard(GuardKind kind, const SourcePtr& source, PyObject* object) {
  if (kind == GuardKind::GradMode) {
    guards.add_grad_mode(object == Py_True);
    return;
  }
  if (!source) return;  // a value the trace made itself needs no guard
  Expected<size_t> added = [&]() -> Expected<size_t> {
    switch (kind) {
      case GuardKind::TypeMatch:
        return guards.add_type_match(source, object);
      case GuardKind::IdMatch:
        return guards.add_id_match(source, object);
      case GuardKind::ConstantMatch:
        return guards.add_constant_match(source, object);
      case GuardKind::TensorMatch:
        return guards.add_tensor_match(source, object);
      case GuardKind::LenMatch:
        return guards.add_len_match(source, object);
      case GuardKind::DictKeys:
        return guards.add_dict_keys(source, object);
      case GuardKind::DictVersion:
        return guards.add_dict_version(source, object);
      case GuardKind::NoHooks:
        return guards.add_no_hooks(source, object);
      case GuardKind::GradMode:
        break;
    }
    return make_error("unknown guard kind");
  }();
  if (!added) unsupported("cannot guard " + source->to_string() + ": " + added.error().message);
}

namespace {

// The decoded form of a code object, kept on the code object itself so that it goes when
// the code object does (runtime-made code: exec, namedtuple, torch.fx) and so that holding
// it does not keep the code object alive. Traces in flight hold their own shared_ptr.
struct DecodedCode {
  std::shared_ptr<const frontend::CodeInfo> info;
};

}  // namespace

std::shared_ptr<const frontend::CodeInfo> TraceContext::code_info(PyObject* code) {
  DecodedCode* kept = CodeExtra<DecodedCode>::get(code, true);  // nullptr: no slot left
  if (kept != nullptr && kept->info) return kept->info;
  auto raw = frontend::raw_code_from_live(reinterpret_cast<PyCodeObject*>(code));
  if (!raw) unsupported("cannot read code object: " + raw.error().message);
  auto decoded = frontend::decode(*raw.value());
  if (!decoded) unsupported("cannot decode code object: " + decoded.error().message);
  auto info = std::make_shared<const frontend::CodeInfo>(std::move(decoded).value());
  if (kept != nullptr) kept->info = info;
  return info;
}

namespace {

bool is_plain_constant(PyObject* o) {
  return o == Py_None || o == Py_Ellipsis || o == Py_NotImplemented || PyBool_Check(o) ||
         PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyComplex_CheckExact(o) ||
         PyUnicode_CheckExact(o) || PyBytes_CheckExact(o);
}

bool is_ordered_dict(PyObject* o) {
  return std::string(Py_TYPE(o)->tp_name) == "collections.OrderedDict";
}

// Exactly a collections.defaultdict: a dict whose only state outside the dict is the factory
// it calls for a missing key, which the trace never calls (a missing key is unsupported).
bool is_default_dict(PyObject* o) {
  return std::string(Py_TYPE(o)->tp_name) == "collections.defaultdict";
}

// Whether every key of a dict is a str, bytes or int, which item sources can name.
bool has_source_keys(PyObject* dict) {
  PyObject* key = nullptr;  // borrowed
  Py_ssize_t position = 0;
  while (PyDict_Next(dict, &position, &key, nullptr)) {
    if (!PyUnicode_CheckExact(key) && !PyBytes_CheckExact(key) && !PyLong_CheckExact(key)) {
      return false;
    }
  }
  return true;
}

// A builtin function bound to an object or a class rather than to its module: a method
// descriptor's or classmethod's binding, which attribute reads make afresh.
bool bound_builtin_method(PyObject* function) {
  PyObject* self = PyCFunction_GET_SELF(function);
  return self != nullptr && !PyModule_Check(self);
}

// A function CPython makes for a generator expression or (before 3.12) a comprehension:
// its code is named <genexpr>, <listcomp>, <setcomp> or <dictcomp>, and it has no
// defaults.
bool is_comprehension_function(PyObject* function) {
  auto* f = reinterpret_cast<PyFunctionObject*>(function);
  PyObject* name = reinterpret_cast<PyCodeObject*>(f->func_code)->co_name;
  if (f->func_defaults != nullptr || f->func_kwdefaults != nullptr || !PyUnicode_Check(name)) {
    return false;
  }
  for (const char* kind : {"<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"}) {
    if (PyUnicode_CompareWithASCIIString(name, kind) == 0) return true;
  }
  return false;
}

PyRef name_object(PyObject* function) {
  PyRef name = PyRef::steal(PyObject_GetAttrString(function, "__name__"));
  if (!name) unsupported_from_python_error("reading a builtin method's name");
  return name;
}

bool is_torch_enum(const KnownObjects* k, PyObject* o) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  return t == k->dtype_type.get() || t == k->layout_type.get() || t == k->memory_format_type.get();
}

// The __dict__ of `object` (borrowed result), made first when `make` and the object has none
// yet; nullptr when it has none.
PyObject* instance_dict_of(PyObject* object, bool make) {
  PyObject** slot = _PyObject_GetDictPtr(object);
  if (slot == nullptr) return nullptr;
  if (*slot == nullptr && make) {
    PyRef made = PyRef::steal(PyObject_GenericGetDict(object, nullptr));
    if (!made) PyErr_Clear();
  }
  return *slot;
}

}  // namespace

ValuePtr TraceContext::wrap_dict_items(PyObject* object, const SourcePtr& source) {
  std::string key = source->to_string();
  if ((PyDict_CheckExact(object) || is_default_dict(object)) && !has_source_keys(object)) {
    // Keys a source cannot name (classes, typing forms: a table of validators by type;
    // tensors: an optimizer's state by parameter): the dict is pinned as it is, its
    // identity and its version, and values are read by position.
    guard(GuardKind::IdMatch, source, object);
    guard(GuardKind::DictVersion, source, object);
    std::vector<ValuePtr> keys, values;
    PyObject *dk, *dv;
    Py_ssize_t pos = 0;
    for (int64_t i = 0; PyDict_Next(object, &pos, &dk, &dv); ++i) {  // borrowed
      keys.push_back(TracedValue::constant(PyRef::borrow(dk)));
      values.push_back(wrap(dv, Source::dict_value(source, i)));
    }
    ValuePtr result = TracedValue::dict(std::move(keys), std::move(values), false, source);
    result->obj = PyRef::borrow(object);
    if (!PyDict_CheckExact(object)) {
      result->class_value =
          TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(object))),
                              Source::attr(source, "__class__"));
    }
    return result;
  }
  guard(GuardKind::DictKeys, source, object);
  std::vector<ValuePtr> keys, values;
  PyObject *dk, *dv;
  Py_ssize_t pos = 0;
  while (PyDict_Next(object, &pos, &dk, &dv)) {  // borrowed
    SourcePtr value_source;
    if (PyUnicode_CheckExact(dk)) {
      value_source = Source::key(source, PyUnicode_AsUTF8(dk));
    } else if (PyBytes_CheckExact(dk)) {
      // A bytes key (os.environ's storage, read by os.getenv and os.environ.get).
      value_source = Source::bytes_key(
          source, std::string(PyBytes_AS_STRING(dk), static_cast<size_t>(PyBytes_GET_SIZE(dk))));
    } else if (PyLong_CheckExact(dk)) {
      // An integer key (a config's id2label): the item source reads base[key], which
      // subscripts a dict as it does a list.
      int overflow = 0;
      long long index = PyLong_AsLongLongAndOverflow(dk, &overflow);
      if (overflow != 0) unsupported("a dict argument with an integer key beyond 64 bits");
      value_source = Source::item(source, index);
    } else {
      unsupported("a dict argument with a " + std::string(Py_TYPE(dk)->tp_name) + " key (" + key +
                  ")");
    }
    keys.push_back(TracedValue::constant(PyRef::borrow(dk)));
    values.push_back(wrap(dv, value_source));
  }
  ValuePtr result = TracedValue::dict(std::move(keys), std::move(values), false, source);
  result->obj = PyRef::borrow(object);
  return result;
}

ValuePtr TraceContext::dict_storage(const ValuePtr& object) {
  PyObject* o = object->py();
  if (!object->is(TracedValue::Kind::Object) || !object->source || o == nullptr ||
      !PyDict_Check(o)) {
    unsupported("the dict items of a " + object->describe());
  }
  std::string key = object->source->to_string();
  auto found = dict_storage_.find(key);
  if (found != dict_storage_.end()) return found->second;
  for (const auto& effect : side_effects) {
    if (effect.kind == SideEffect::Kind::BaseSetItem && effect.target->to_string() == key) {
      unsupported("reading the items of a " + object->describe() + " the trace wrote to");
    }
  }
  // Its builtin base's iteration and item lookup, which the guards then use too.
  PyTypeObject* base = Py_TYPE(o);
  while (base->tp_flags & Py_TPFLAGS_HEAPTYPE) base = base->tp_base;
  for (const char* method : {"__iter__", "__getitem__"}) {
    PyRef name = PyRef::steal(PyUnicode_InternFromString(method));
    if (_PyType_Lookup(Py_TYPE(o), name.get()) != _PyType_Lookup(base, name.get())) {
      unsupported("the dict items of a " + object->describe() + " with its own " + method);
    }
  }
  guard(GuardKind::TypeMatch, object->source, o);
  ValuePtr items = wrap_dict_items(o, object->source);
  dict_storage_.emplace(key, items);
  return items;
}

ValuePtr TraceContext::wrap(PyObject* object, const SourcePtr& source) {
  const KnownObjects* k = KnownObjects::get();
  if (k == nullptr) unsupported_from_python_error("importing torch");
  std::string key = source ? source->to_string() : "";
  if (!key.empty()) {
    auto it = wrapped_.find(key);
    if (it != wrapped_.end()) return it->second;
  }
  ValuePtr result;
  if (!key.empty() && (PyLong_CheckExact(object) || PyFloat_CheckExact(object)) &&
      options.dynamic_sources.count(key) != 0) {
    // A number that changes from call to call (a loop counter): its value is not traced.
    guard(GuardKind::TypeMatch, source, object);
    result = TracedValue::object(PyRef::borrow(object), source);
  } else if (object == Py_None || PyBool_Check(object)) {
    guard(GuardKind::IdMatch, source, object);
    result = TracedValue::constant(PyRef::borrow(object), source);
  } else if (is_plain_constant(object)) {
    guard(GuardKind::ConstantMatch, source, object);
    result = TracedValue::constant(PyRef::borrow(object), source);
  } else if (PyAnySet_CheckExact(object) && is_guardable_set(object)) {
    // A set of names, numbers or classes ('in' on a global set): equal to what it is now.
    guard(GuardKind::ConstantMatch, source, object);
    result = TracedValue::constant(PyRef::borrow(object), source);
  } else if (is_torch_enum(k, object) ||
             PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(k->enum_type.get()))) {
    // dtypes, layouts and the members of Enum classes are singletons.
    guard(GuardKind::IdMatch, source, object);
    result = TracedValue::constant(PyRef::borrow(object), source);
  } else if (reinterpret_cast<PyObject*>(Py_TYPE(object)) == k->device_type.get()) {
    guard(GuardKind::ConstantMatch, source, object);
    result = TracedValue::constant(PyRef::borrow(object), source);
  } else if (k->grad_mode_exit_type &&
             reinterpret_cast<PyObject*>(Py_TYPE(object)) == k->grad_mode_exit_type.get()) {
    // The exit of a grad-mode `with` block rebuilt after a break: calling it restores.
    guard(GuardKind::TypeMatch, source, object);
    PyRef restore = PyRef::steal(PyObject_GetAttrString(object, "restore"));
    if (!restore) unsupported_from_python_error("reading a grad-mode exit");
    guard(GuardKind::IdMatch, Source::attr(source, "restore"), restore.get());
    result = std::make_shared<TracedValue>();
    result->kind = TracedValue::Kind::GradModeExit;
    result->flag = restore.get() == Py_True;
    result->source = source;
  } else if (is_tensor(object)) {
    if (!source) unsupported("a tensor with no source");
    guard(GuardKind::TensorMatch, source, object);
    result = bridge->input_tensor(object, source);
  } else if (PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(k->size_type.get()))) {
    guard(GuardKind::ConstantMatch, source, object);
    std::vector<ValuePtr> items;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(object); ++i) {
      items.push_back(TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(object, i))));
    }
    result = TracedValue::tuple(std::move(items), source);
    result->is_size = true;
    result->obj = PyRef::borrow(object);
  } else if (PyTuple_Check(object) && !PyTuple_CheckExact(object) &&
             PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(object)), "_fields")) {
    // A named tuple: its fields, and its class for attribute access and rebuilding.
    guard(GuardKind::LenMatch, source, object);
    std::vector<ValuePtr> items;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(object); ++i) {
      items.push_back(wrap(PyTuple_GET_ITEM(object, i), Source::item(source, i)));
    }
    result = TracedValue::tuple(std::move(items), source);
    result->class_value =
        TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(object))),
                            Source::attr(source, "__class__"));
  } else if (PyTuple_CheckExact(object) || PyList_CheckExact(object)) {
    guard(GuardKind::LenMatch, source, object);
    std::vector<ValuePtr> items;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(object);
    for (Py_ssize_t i = 0; i < n; ++i) {
      items.push_back(wrap(PySequence_Fast_GET_ITEM(object, i), Source::item(source, i)));
    }
    result = PyTuple_CheckExact(object) ? TracedValue::tuple(std::move(items), source)
                                        : TracedValue::list(std::move(items), false, source);
    result->obj = PyRef::borrow(object);
  } else if (PyDict_CheckExact(object) || is_ordered_dict(object) ||
             (is_default_dict(object) && !has_source_keys(object))) {
    result = wrap_dict_items(object, source);
  } else if (PyRange_Check(object)) {
    guard(GuardKind::ConstantMatch, source, object);
    auto r = std::make_shared<TracedValue>();
    r->kind = TracedValue::Kind::Range;
    r->obj = PyRef::borrow(object);
    r->source = source;
    result = r;
  } else if (PyModule_Check(object) || PyType_Check(object) || PyFunction_Check(object) ||
             PyCFunction_Check(object) || is_module(object) ||
             Py_TYPE(object) == &PyMethodDescr_Type || Py_TYPE(object) == &PyWrapperDescr_Type ||
             Py_TYPE(object) == &PyClassMethodDescr_Type || PyMethod_Check(object)) {
    if (PyMethod_Check(object) && source) {
      // A bound method is made afresh at each attribute read (`logger.warning_once`), so
      // its identity never holds twice: what stays is its function and its instance.
      guard(GuardKind::TypeMatch, source, object);
      guard(GuardKind::IdMatch, Source::attr(source, "__func__"), PyMethod_GET_FUNCTION(object));
      guard(GuardKind::IdMatch, Source::attr(source, "__self__"), PyMethod_GET_SELF(object));
    } else if (PyFunction_Check(object) && source && source->kind() == Source::Kind::Stack &&
               is_comprehension_function(object)) {
      // A generator expression's (3.11: a comprehension's) function, left on the value
      // stack by a graph break: every call makes a new one, which the code only iterates
      // or calls there and never compares. What stays is its code and globals; a call
      // reads its cells through sources, each guarded on what it holds.
      auto* function = reinterpret_cast<PyFunctionObject*>(object);
      guard(GuardKind::TypeMatch, source, object);
      guard(GuardKind::IdMatch, Source::attr(source, "__code__"), function->func_code);
      guard(GuardKind::IdMatch, Source::attr(source, "__globals__"), function->func_globals);
    } else if (PyCFunction_Check(object) && source && bound_builtin_method(object)) {
      // Likewise a builtin method bound to an object or a class (`self.keys` of an
      // OrderedDict, torch 2.14's `Function.apply`, a classmethod bound to the class): made
      // afresh at each read; what stays is its instance and its name.
      guard(GuardKind::TypeMatch, source, object);
      guard(GuardKind::IdMatch, Source::attr(source, "__self__"), PyCFunction_GET_SELF(object));
      guard(GuardKind::ConstantMatch, Source::attr(source, "__name__"), name_object(object).get());
    } else {
      guard(GuardKind::IdMatch, source, object);
    }
    result = TracedValue::object(PyRef::borrow(object), source);
  } else if (source && !options.opaque_live_iterators && is_sequence_iterator(object)) {
    // A list or tuple iterator (one a break left on the stack): an Iterator over what it has
    // yet to give, guarded item by item; what the trace takes from it is taken from the
    // live iterator after the graph runs.
    auto seen = iterators_.emplace(object, key);
    if (!seen.second && seen.first->second != key) {
      unsupported("one iterator reachable as " + seen.first->second + " and as " + key);
    }
    guard(GuardKind::TypeMatch, source, object);
    read_live_iterator = true;
    PyObject* walked = nullptr;
    PyRef rest = PyRef::steal(iterator_rest(object, &walked));
    if (!rest) unsupported_from_python_error("reading an iterator");
    if (walked != nullptr) {
      auto c = containers_.find(walked);
      if (c != containers_.end() && c->second.value->mutable_here) {
        unsupported("an iterator over " + c->second.key + ", which the trace mutates");
      }
      iterated_.emplace(walked, key);
    }
    ValuePtr items = wrap(rest.get(), Source::attr(source, kIteratorRest));
    result = TracedValue::iterator(items->items);
    result->source = source;
    result->obj = PyRef::borrow(object);
    side_effects.push_back(
        PendingSideEffect{SideEffect::Kind::AdvanceIterator, source, "", result});
  } else {
    // Any other object: its type is fixed, its attributes are guarded as they are read.
    guard(GuardKind::TypeMatch, source, object);
    result = TracedValue::object(PyRef::borrow(object), source);
  }
  if (!key.empty()) wrapped_[key] = result;
  if (result->is(TracedValue::Kind::Dict)) {
    auto owner = written_instance_dicts_.find(object);
    if (owner != written_instance_dicts_.end()) {
      unsupported("reading the __dict__ of " + owner->second +
                  " after setting its attributes (as " + key + ")");
    }
  }
  if (result->is(TracedValue::Kind::List) || result->is(TracedValue::Kind::Dict)) {
    // The same container under two names (a = b = [...], a list two modules share) is two
    // traced values: fine while the trace only reads it, not followed once it mutates it.
    auto [it, added] = containers_.emplace(object, Container{key, result});
    if (!added && it->second.key != key) {
      if (it->second.value->mutable_here) {
        unsupported("one " + std::string(Py_TYPE(object)->tp_name) + " mutated as " +
                    it->second.key + " and reachable as " + key);
      }
      it->second.aliased = true;
    }
  }
  return result;
}

void TraceContext::check_generator_mutation(const ValuePtr& value, const std::string& what) const {
  if (generator_depth == 0 || (!value->source && value->serial >= generator_start_serial)) return;
  unsupported(what + " inside a generator, of a " + value->describe() +
              " made before it (eager runs the generator step by step, between the reads of " +
              "its consumer)");
}

bool TraceContext::deferred_call_after(size_t effect) const {
  for (size_t e = effect + 1; e < side_effects.size(); ++e) {
    if (side_effects[e].kind == SideEffect::Kind::CallMethod) return true;
  }
  return false;
}

bool TraceContext::track_mutation(const ValuePtr& container) {
  check_generator_mutation(container, "mutating a container");
  if (container->source) ++container_mutations;
  if (container->mutable_here) {
    for (size_t e = 0; container->source && e < side_effects.size(); ++e) {
      bool replaces = side_effects[e].kind == SideEffect::Kind::ReplaceList ||
                      side_effects[e].kind == SideEffect::Kind::ReplaceDict;
      if (replaces && side_effects[e].value == container && deferred_call_after(e)) {
        unsupported("mutating a " + container->describe() +
                    " again after a log call or a warning, whose handlers run after the graph");
      }
    }
    return true;
  }
  if (!container->source ||
      !(container->is(TracedValue::Kind::List) || container->is(TracedValue::Kind::Dict)) ||
      container->obj.get() == nullptr) {
    return false;
  }
  bool is_list = container->is(TracedValue::Kind::List);
  if (is_list ? !PyList_CheckExact(container->py()) : !PyDict_CheckExact(container->py())) {
    return false;  // an OrderedDict or another subclass: not replayed
  }
  auto walked = iterated_.find(container->py());
  if (walked != iterated_.end()) {
    unsupported("mutating a " + std::string(Py_TYPE(container->py())->tp_name) +
                " that the iterator " + walked->second + " walks");
  }
  auto seen = containers_.find(container->py());
  if (seen != containers_.end() && seen->second.aliased) {
    unsupported("one " + std::string(Py_TYPE(container->py())->tp_name) + " reachable as " +
                seen->second.key + " and under another name is mutated");
  }
  container->mutable_here = true;
  side_effects.push_back(
      PendingSideEffect{is_list ? SideEffect::Kind::ReplaceList : SideEffect::Kind::ReplaceDict,
                        container->source, "", container});
  return true;
}

bool TraceContext::record_attribute_write(const ValuePtr& object, const std::string& name,
                                          const ValuePtr& value, SideEffect::Kind kind) {
  check_generator_mutation(object, "setting the attribute '" + name + "'");
  if (object->is(TracedValue::Kind::Tensor) && object->source && name == "grad" &&
      kind == SideEffect::Kind::SetAttr && value->is_constant() && value->py() == Py_None) {
    // `p.grad = None` (zero_grad) on a tensor read from a source: set after the graph runs;
    // later reads in the trace see None. Setting a tensor would need autograd's checks.
    side_effects.push_back(PendingSideEffect{kind, object->source, name, value});
    attribute_writes[{object->py(), name}] = value;
    return true;
  }
  if (!object->is(TracedValue::Kind::Object) || !object->source || object->py() == nullptr) {
    return false;
  }
  PyTypeObject* type = Py_TYPE(object->py());
  // Only plain instances and nn.Modules: their setattr is Python-level or generic.
  if (PyModule_Check(object->py()) || PyType_Check(object->py()) ||
      !(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    return false;
  }
  // Without a __dict__ only slots can be set (anything else raises AttributeError).
  if (!has_instance_dict(reinterpret_cast<PyObject*>(type)) &&
      !is_slot(reinterpret_cast<PyObject*>(type), name)) {
    return false;
  }
  if (kind == SideEffect::Kind::GenericSetAttr) {
    // object.__setattr__ on an nn.Module would bypass what Module.__setattr__ keeps in order,
    // and a data descriptor of the class (a property) would run code the trace did not see.
    if (is_module(object->py())) return false;
    PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
    PyObject* descr = _PyType_Lookup(type, key.get());  // borrowed
    if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr &&
        Py_TYPE(descr) != &PyMemberDescr_Type) {
      return false;
    }
  }
  // The trace's attribute writes are replayed one by one: a new __dict__ is not one of them.
  if (name == "__dict__") return false;
  if (PyObject* dict = instance_dict_of(object->py(), true)) {
    auto held = containers_.find(dict);
    if (held != containers_.end()) {
      // A plain setattr stores the value in the dict: the Dict the trace holds (not mutated by
      // it, so only the SetAttr is replayed) takes the write too. object.__setattr__ is plain
      // whatever the class's own __setattr__ (ModelOutput's calls it through super()).
      // Anything else ends the trace.
      PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
      PyObject* descr = _PyType_Lookup(type, key.get());  // borrowed
      const ValuePtr& held_dict = held->second.value;
      bool generic =
          kind == SideEffect::Kind::GenericSetAttr || type->tp_setattro == PyObject_GenericSetAttr;
      if (held->second.aliased || held_dict->mutable_here || !generic ||
          (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr)) {
        unsupported("setting attribute '" + name + "' of " + object->source->to_string() +
                    " while the trace holds its __dict__ as " + held->second.key);
      }
      size_t i = 0;
      while (i < held_dict->keys.size() &&
             !(PyUnicode_Check(held_dict->keys[i]->py()) &&
               PyUnicode_Compare(held_dict->keys[i]->py(), key.get()) == 0)) {
        ++i;
      }
      if (i == held_dict->keys.size()) {
        held_dict->keys.push_back(TracedValue::constant(key));
        held_dict->items.push_back(value);
      } else {
        held_dict->items[i] = value;
      }
    }
    written_instance_dicts_.emplace(dict, object->source->to_string());
  }
  side_effects.push_back(PendingSideEffect{kind, object->source, name, value});
  attribute_writes[{object->py(), name}] = value;
  return true;
}

bool TraceContext::record_base_item_write(const ValuePtr& object, const std::string& key,
                                          const ValuePtr& value) {
  if (!object->is(TracedValue::Kind::Object) || !object->source || object->py() == nullptr ||
      !PyDict_Check(object->py()) || PyDict_CheckExact(object->py()) || is_module(object->py())) {
    return false;
  }
  // The trace read its items through dict_storage: those reads would not see the write.
  if (dict_storage_.count(object->source->to_string()) != 0) return false;
  side_effects.push_back(
      PendingSideEffect{SideEffect::Kind::BaseSetItem, object->source, key, value});
  return true;
}

ValuePtr TraceContext::attribute_written(const ValuePtr& object, const std::string& name) const {
  if (!global_writes_.empty() && object->is(TracedValue::Kind::Object) && object->py() != nullptr &&
      PyModule_Check(object->py())) {
    // `module.name` after code of that module set or deleted its global `name`.
    ValuePtr written = global_written(PyModule_GetDict(object->py()), name);
    if (written && written->is_null()) {
      unsupported("reading attribute '" + name + "' of a module after the trace deleted it");
    }
    if (written) return written;
  }
  if (!object->source || object->py() == nullptr || attribute_writes.empty()) return nullptr;
  auto it = attribute_writes.find({object->py(), name});
  return it == attribute_writes.end() ? nullptr : it->second;
}

void TraceContext::check_attribute_read(PyObject* object, const std::string& name) const {
  if (containers_.empty() || name == "__dict__" || name == "__class__") return;
  PyObject* dict = instance_dict_of(object, false);
  if (dict == nullptr) return;
  auto held = containers_.find(dict);
  if (held != containers_.end() && held->second.value->mutable_here) {
    unsupported("reading attribute '" + name +
                "' of an object whose __dict__ the trace mutated (as " + held->second.key + ")");
  }
}

bool truthiness(const ValuePtr& value) {
  switch (value->kind) {
    case TracedValue::Kind::Constant: {
      int t = PyObject_IsTrue(value->py());
      if (t < 0) unsupported_from_python_error("truth value");
      return t != 0;
    }
    case TracedValue::Kind::Tuple:
    case TracedValue::Kind::List:
    case TracedValue::Kind::Dict:
      return !value->items.empty();
    case TracedValue::Kind::DictView:
      return !value->self_value->keys.empty();
    case TracedValue::Kind::Tensor:
      unsupported("data-dependent control flow: the truth value of a tensor");
    case TracedValue::Kind::Range: {
      int t = PyObject_IsTrue(value->py());
      if (t < 0) unsupported_from_python_error("truth value");
      return t != 0;
    }
    case TracedValue::Kind::Object: {
      PyTypeObject* type = Py_TYPE(value->py());
      bool has_bool = type->tp_as_number != nullptr && type->tp_as_number->nb_bool != nullptr;
      bool has_len = (type->tp_as_sequence != nullptr && type->tp_as_sequence->sq_length) ||
                     (type->tp_as_mapping != nullptr && type->tp_as_mapping->mp_length);
      if (!has_bool && !has_len) return true;
      if (is_module(value->py())) {
        // Containers (Sequential, ModuleList) have a length: the number of children.
        Py_ssize_t n = PyObject_Length(value->py());
        if (n < 0) unsupported_from_python_error("len()");
        return n > 0;
      }
      unsupported("the truth value of a " + value->describe());
    }
    case TracedValue::Kind::NewObject: {
      bool known = false;
      bool truth = new_object_truth(value, &known);
      if (known) return truth;
      unsupported("the truth value of a " + value->describe());
    }
    case TracedValue::Kind::Partial:
    case TracedValue::Kind::Function:
    case TracedValue::Kind::BoundMethod:
    case TracedValue::Kind::Slice:
    case TracedValue::Kind::Iterator:
    case TracedValue::Kind::GradMode:
    case TracedValue::Kind::NoOpContext:
      return true;
    default:
      unsupported("the truth value of a " + value->describe());
  }
}

PyRef concrete_number(PyObject* number) {
  const KnownObjects* k = KnownObjects::get();
  if (k == nullptr || !k->is_symbolic_number(number)) return PyRef::borrow(number);
  PyRef out;
  auto* type = reinterpret_cast<PyObject*>(Py_TYPE(number));
  if (type == k->sym_bool_type.get()) {
    int truth = PyObject_IsTrue(number);
    if (truth >= 0) out = PyRef::borrow(truth != 0 ? Py_True : Py_False);
  } else if (type == k->sym_float_type.get()) {
    out = PyRef::steal(PyNumber_Float(number));
  } else {
    out = PyRef::steal(PyNumber_Index(number));
  }
  if (!out) unsupported_from_python_error("the value of a symbolic size");
  return out;
}

ValuePtr fresh_constant(PyRef result, Py_ssize_t transient) {
  // No other object or name holds it.
  bool fresh_set = PySet_CheckExact(result.get()) && Py_REFCNT(result.get()) == 1 + transient;
  ValuePtr value = TracedValue::constant(std::move(result));
  value->mutable_here = fresh_set;
  return value;
}

PyRef concrete_object(const ValuePtr& value) {
  switch (value->kind) {
    case TracedValue::Kind::Constant:
      return concrete_number(value->py());
    case TracedValue::Kind::Range:
      return value->obj;
    case TracedValue::Kind::Object:
      // An object with data its guards do not pin (a numpy array) cannot be computed
      // with while tracing: the result would be baked into the trace.
      if (!identity_is_enough(value->py())) return PyRef();
      return value->obj;
    case TracedValue::Kind::Iterator: {
      // One whose items are still to be made (a generator) is not a value to compute with.
      if (value->lazy && value->lazy->pending()) return PyRef();
      auto rest = TracedValue::list(
          std::vector<ValuePtr>(value->items.begin() + static_cast<long>(value->position),
                                value->items.end()),
          true);
      return concrete_object(rest);
    }
    case TracedValue::Kind::Tuple:
    case TracedValue::Kind::List: {
      bool symbolic = false;
      for (const ValuePtr& item : value->items) {
        symbolic = symbolic || (item->is_constant() && KnownObjects::get() != nullptr &&
                                KnownObjects::get()->is_symbolic_number(item->py()));
      }
      if (value->is_size && value->obj && !symbolic) return value->obj;
      if (value->is_size) {
        std::vector<ValuePtr> items = value->items;
        auto plain = TracedValue::tuple(std::move(items));
        PyRef t = concrete_object(plain);
        if (!t) return PyRef();
        return PyRef::steal(PyObject_CallOneArg(KnownObjects::get()->size_type.get(), t.get()));
      }
      PyRef out = PyRef::steal(value->kind == TracedValue::Kind::Tuple
                                   ? PyTuple_New(static_cast<Py_ssize_t>(value->items.size()))
                                   : PyList_New(static_cast<Py_ssize_t>(value->items.size())));
      for (size_t i = 0; i < value->items.size(); ++i) {
        PyRef item = concrete_object(value->items[i]);
        if (!item) return PyRef();
        if (value->kind == TracedValue::Kind::Tuple) {
          PyTuple_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), item.release());
        } else {
          PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), item.release());
        }
      }
      return out;
    }
    case TracedValue::Kind::Dict: {
      PyRef out = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < value->keys.size(); ++i) {
        PyRef v = concrete_object(value->items[i]);
        if (!v) return PyRef();
        if (PyDict_SetItem(out.get(), value->keys[i]->py(), v.get()) < 0) {
          PyErr_Clear();
          return PyRef();
        }
      }
      if (value->dict_class() != reinterpret_cast<PyObject*>(&PyDict_Type)) {
        out = PyRef::steal(PyObject_CallOneArg(value->dict_class(), out.get()));
        if (!out) PyErr_Clear();
      }
      return out;
    }
    case TracedValue::Kind::DictView: {
      PyRef dict = concrete_object(value->self_value);
      if (!dict) return PyRef();
      PyRef view = PyRef::steal(PyObject_CallMethod(dict.get(), value->view_method(), nullptr));
      if (!view) PyErr_Clear();
      return view;
    }
    case TracedValue::Kind::Slice: {
      PyRef parts[3];
      for (int i = 0; i < 3; ++i) {
        parts[i] = concrete_object(value->items[i]);
        if (!parts[i]) return PyRef();
      }
      return PyRef::steal(PySlice_New(parts[0].get(), parts[1].get(), parts[2].get()));
    }
    default:
      return PyRef();
  }
}

}  // namespace dynvm::vm
