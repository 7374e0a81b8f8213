// GuardSet: building guards from the values the VM saw, deduplicating and printing them.
#include <algorithm>
#include <utility>

#include "dynvm/vm/guard.h"
#include "python_values.h"

namespace dynvm::vm {

namespace {

// The hook dicts an nn.Module instance carries, across the torch versions dynvm supports
// (1.13 has the first three); absent names are skipped.
constexpr const char* kModuleHookNames[] = {
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called",
};

// The global hook dicts of torch.nn.modules.module, applied to every module's __call__.
constexpr const char* kGlobalHooksModule = "torch.nn.modules.module";
constexpr const char* kGlobalHookNames[] = {
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
};

const char* python_bool(bool value) { return value ? "True" : "False"; }

}  // namespace

const std::vector<std::string>& module_hook_names() {
  static const std::vector<std::string> names(std::begin(kModuleHookNames),
                                              std::end(kModuleHookNames));
  return names;
}

const std::vector<std::string>& global_module_hook_names() {
  static const std::vector<std::string> names(std::begin(kGlobalHookNames),
                                              std::end(kGlobalHookNames));
  return names;
}

namespace {

// Whether two payloads of guards of `kind` on the same source say the same thing. GIL held.
bool same_payload(GuardKind kind, const GuardPayload& a, const GuardPayload& b) {
  switch (kind) {
    case GuardKind::TypeMatch:
      return std::get<TypeMatchPayload>(a).type.get() == std::get<TypeMatchPayload>(b).type.get();
    case GuardKind::IdMatch:
      return std::get<IdMatchPayload>(a).object.get() == std::get<IdMatchPayload>(b).object.get();
    case GuardKind::ConstantMatch:
      return constant_matches(std::get<ConstantMatchPayload>(a).value.get(),
                              std::get<ConstantMatchPayload>(b).value.get());
    case GuardKind::TensorMatch:
      return std::get<TensorMatchPayload>(a).spec == std::get<TensorMatchPayload>(b).spec;
    case GuardKind::LenMatch: {
      const auto& x = std::get<LenMatchPayload>(a);
      const auto& y = std::get<LenMatchPayload>(b);
      return x.type.get() == y.type.get() && x.length == y.length;
    }
    case GuardKind::DictKeys: {
      const auto& x = std::get<DictKeysPayload>(a);
      const auto& y = std::get<DictKeysPayload>(b);
      return x.type.get() == y.type.get() && constant_matches(x.keys.get(), y.keys.get());
    }
    case GuardKind::DictVersion:
      return std::get<DictVersionPayload>(a).version == std::get<DictVersionPayload>(b).version;
    case GuardKind::ModuleAttrs: {
      const auto& x = std::get<ModuleAttrsPayload>(a);
      const auto& y = std::get<ModuleAttrsPayload>(b);
      if (x.type.get() != y.type.get() || x.attrs.size() != y.attrs.size()) return false;
      for (size_t i = 0; i < x.attrs.size(); ++i) {
        const ModuleAttr& u = x.attrs[i];
        const ModuleAttr& v = y.attrs[i];
        if (u.by_identity != v.by_identity || PyUnicode_Compare(u.name.get(), v.name.get()) != 0) {
          return false;
        }
        bool same = u.by_identity ? u.value.get() == v.value.get()
                                  : constant_matches(u.value.get(), v.value.get());
        if (!same) return false;
      }
      return true;
    }
    case GuardKind::DuplicateInput:
      return std::get<DuplicateInputPayload>(a).first == std::get<DuplicateInputPayload>(b).first;
    case GuardKind::NoHooks:        // "no hooks" on one module says one thing, whenever read
    case GuardKind::NoGlobalHooks:  // likewise for the global hooks
      return true;
    case GuardKind::GradMode:
      return std::get<GradModePayload>(a).enabled == std::get<GradModePayload>(b).enabled;
    case GuardKind::DefaultDtype:
      return std::get<DefaultDtypePayload>(a).dtype == std::get<DefaultDtypePayload>(b).dtype;
    case GuardKind::Autocast:
      return std::get<AutocastPayload>(a).state == std::get<AutocastPayload>(b).state;
    case GuardKind::WarningFilters: {
      const auto& x = std::get<WarningFiltersPayload>(a);
      const auto& y = std::get<WarningFiltersPayload>(b);
      return x.module.get() == y.module.get() &&
             PyObject_RichCompareBool(x.filters.get(), y.filters.get(), Py_EQ) == 1 &&
             PyObject_RichCompareBool(x.default_action.get(), y.default_action.get(), Py_EQ) == 1;
    }
    case GuardKind::ShapeRelations: {
      const auto& x = std::get<ShapeRelationsPayload>(a);
      const auto& y = std::get<ShapeRelationsPayload>(b);
      return x.relations == y.relations && x.symbol_sources == y.symbol_sources;
    }
  }
  return false;
}

bool has_source(GuardKind kind) {
  return static_cast<int>(kind) <= static_cast<int>(GuardKind::ModuleAttrs);
}

// "['a', 'b']": reprs of the items of a tuple of constants (borrowed).
std::string constants_list_text(PyObject* tuple) {
  std::string text = "[";
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    if (i > 0) text += ", ";
    text += repr_text(PyTuple_GET_ITEM(tuple, i));
  }
  return text + "]";
}

// New reference: a tuple of the keys of `dict` (borrowed, a dict or subclass) in iteration
// order, or nullptr with a Python error set.
PyObject* dict_keys_tuple(PyObject* dict) {
  if (PyDict_CheckExact(dict)) {
    PyRef list = PyRef::steal(PyDict_Keys(dict));  // new
    return list ? PyList_AsTuple(list.get()) : nullptr;
  }
  return PySequence_Tuple(dict);  // iterates like `for k in d`, so an OrderedDict's order
}

}  // namespace

const char* guard_kind_name(GuardKind kind) {
  switch (kind) {
#define DYNVM_GUARD_KIND_NAME(kind, name, payload) \
  case GuardKind::kind:                            \
    return name;
    DYNVM_GUARD_KINDS(DYNVM_GUARD_KIND_NAME)
#undef DYNVM_GUARD_KIND_NAME
  }
  return "?";
}

Expected<size_t> GuardSet::add(GuardKind kind, const SourcePtr& source, GuardPayload payload,
                               const std::string& detail) {
  int slot = -1;
  if (has_source(kind)) {
    slot = sources_.intern(source);
    if (slot < 0) {
      return make_error(std::string(guard_kind_name(kind)) + ": cannot read source " +
                        (source ? source->to_string() : std::string("(none)")));
    }
  }
  std::vector<size_t>& same = index_[{static_cast<int>(kind), slot}];
  for (size_t existing : same) {
    if (same_payload(kind, guards_[existing].payload, payload)) return existing;
  }
  Guard guard;
  guard.kind = kind;
  guard.source = slot;
  guard.payload = std::move(payload);
  guard.text = guard_kind_name(kind);
  if (slot >= 0) guard.text += " " + sources_[slot].text;
  guard.text += detail;
  guards_.push_back(std::move(guard));
  same.push_back(guards_.size() - 1);
  return guards_.size() - 1;
}

Expected<size_t> GuardSet::merge(const GuardSet& other) {
  for (const Guard& guard : other.guards_) {
    if (guard.kind == GuardKind::DuplicateInput) continue;
    SourcePtr source = guard.source >= 0 ? other.sources_[guard.source].source : nullptr;
    std::string prefix = guard_kind_name(guard.kind);
    if (guard.source >= 0) prefix += " " + other.sources_[guard.source].text;
    std::string detail = guard.text.substr(std::min(prefix.size(), guard.text.size()));
    Expected<size_t> added = add(guard.kind, source, guard.payload, detail);
    if (!added) return added.error();
  }
  return guards_.size();
}

Expected<size_t> GuardSet::add_type_match(const SourcePtr& source, PyObject* value) {
  PyTypeObject* type = Py_TYPE(value);
  return add(GuardKind::TypeMatch, source,
             TypeMatchPayload{GuardedObject(reinterpret_cast<PyObject*>(type))},
             " " + type_name(type));
}

Expected<size_t> GuardSet::add_id_match(const SourcePtr& source, PyObject* value) {
  return add(GuardKind::IdMatch, source, IdMatchPayload{GuardedObject(value)}, "");
}

Expected<size_t> GuardSet::add_duplicate_input(const SourcePtr& source, const SourcePtr& first) {
  int slot = sources_.intern(first);
  if (slot < 0) {
    return make_error("DUPLICATE_INPUT: cannot read source " +
                      (first ? first->to_string() : std::string("(none)")));
  }
  return add(GuardKind::DuplicateInput, source, DuplicateInputPayload{slot},
             " is " + sources_[slot].text);
}

Expected<size_t> GuardSet::add_constant_match(const SourcePtr& source, PyObject* value) {
  if (!is_guardable_constant(value)) {
    return make_error("a " + type_name(Py_TYPE(value)) +
                      " is not a constant (None, bool, int, float, str, bytes, complex, "
                      "torch.device, a tuple of those, or a set of None, int, str, bytes and "
                      "classes)");
  }
  PyRef kept = PyRef::borrow(value);
  if (PySet_CheckExact(value)) {
    // A set may change in place: the guard keeps a copy of what it holds now.
    kept = PyRef::steal(PySet_New(value));
    if (!kept) return make_error("cannot copy a set: " + take_error_text());
  }
  return add(GuardKind::ConstantMatch, source, ConstantMatchPayload{std::move(kept)},
             " == " + repr_text(value));
}

Expected<size_t> GuardSet::add_tensor_match(const SourcePtr& source, PyObject* tensor) {
  Expected<TensorSpec> spec = tensor_spec_of(tensor);
  if (!spec) return spec.error();
  std::string detail = ": " + vm::to_string(*spec);
  return add(GuardKind::TensorMatch, source, TensorMatchPayload{std::move(*spec)}, detail);
}

Expected<size_t> GuardSet::add_len_match(const SourcePtr& source, PyObject* value) {
  ErrorStash stash;
  Py_ssize_t length = PyObject_Size(value);
  if (length < 0) return make_error("len() failed: " + take_error_text());
  PyTypeObject* type = Py_TYPE(value);
  return add(GuardKind::LenMatch, source,
             LenMatchPayload{GuardedObject(reinterpret_cast<PyObject*>(type)), length},
             " " + type_name(type) + " len " + std::to_string(length));
}

Expected<size_t> GuardSet::add_dict_keys(const SourcePtr& source, PyObject* dict) {
  if (!PyDict_Check(dict)) return make_error("a " + type_name(Py_TYPE(dict)) + " is not a dict");
  ErrorStash stash;
  PyRef keys = PyRef::steal(dict_keys_tuple(dict));  // new
  if (!keys) return make_error("cannot read the keys: " + take_error_text());
  if (!is_guardable_constant(keys.get())) return make_error("not all keys are constants");
  PyTypeObject* type = Py_TYPE(dict);
  std::string detail = " " + type_name(type) + " " + constants_list_text(keys.get());
  return add(GuardKind::DictKeys, source,
             DictKeysPayload{GuardedObject(reinterpret_cast<PyObject*>(type)), std::move(keys)},
             detail);
}

Expected<size_t> GuardSet::add_dict_version(const SourcePtr& source, PyObject* dict) {
  if (!PyDict_CheckExact(dict) &&
      std::string(Py_TYPE(dict)->tp_name) != "collections.defaultdict") {
    // A dict subclass may keep state outside the dict (an OrderedDict's order); a
    // defaultdict's factory only matters for a missing key, which no trace reads.
    return make_error("a " + type_name(Py_TYPE(dict)) + " is not exactly a dict");
  }
  return add(GuardKind::DictVersion, source, DictVersionPayload{dict_version(dict)}, "");
}

Expected<size_t> GuardSet::add_module_dict_version(const SourcePtr& module_source,
                                                   PyObject* module) {
  PyObject* dict = instance_dict(module);  // borrowed
  if (dict == nullptr) return make_error("a " + type_name(Py_TYPE(module)) + " has no __dict__");
  return add_dict_version(Source::attr(module_source, "__dict__"), dict);
}

Expected<size_t> GuardSet::add_module_attrs(const SourcePtr& module_source, PyObject* module) {
  PyObject* dict = instance_dict(module);  // borrowed
  if (dict == nullptr) return make_error("a " + type_name(Py_TYPE(module)) + " has no __dict__");
  PyTypeObject* type = Py_TYPE(module);
  if (!has_generic_getattribute(type)) {
    return make_error("a " + type_name(type) + " has its own __getattribute__");
  }
  ModuleAttrsPayload payload;
  payload.type = GuardedObject(reinterpret_cast<PyObject*>(type));
  payload.type_version = type_version(type);
  payload.dict_version = dict_version(dict);
  std::string detail = ":";
  PyObject* key = nullptr;  // borrowed
  PyObject* value = nullptr;
  for (Py_ssize_t position = 0; PyDict_Next(dict, &position, &key, &value);) {
    if (!PyUnicode_CheckExact(key)) continue;
    bool by_identity = value == Py_None || PyBool_Check(value);
    if (!by_identity && !is_guardable_constant(value)) continue;  // tensors, dicts, modules
    PyRef kept = PyRef::borrow(value);
    if (PySet_CheckExact(value)) {
      kept = PyRef::steal(PySet_New(value));  // a set may change in place: a copy
      if (!kept) return make_error("cannot copy a set: " + take_error_text());
    }
    payload.attrs.push_back(ModuleAttr{PyRef::borrow(key), std::move(kept), by_identity});
    detail += (payload.attrs.size() > 1 ? ", " : " ") + std::string(PyUnicode_AsUTF8(key)) + "=" +
              repr_text(value);
  }
  return add(GuardKind::ModuleAttrs, module_source, std::move(payload), detail);
}

Expected<size_t> GuardSet::add_no_global_hooks() {
  ErrorStash stash;
  PyRef module = PyRef::steal(PyImport_ImportModule(kGlobalHooksModule));  // new
  if (!module) return make_error("cannot import torch.nn: " + take_error_text());
  NoGlobalHooksPayload payload;
  for (const char* name : kGlobalHookNames) {
    PyRef hooks = PyRef::steal(PyObject_GetAttrString(module.get(), name));  // new
    if (!hooks) {
      PyErr_Clear();  // not in this torch version
      continue;
    }
    if (!PyDict_Check(hooks.get())) continue;  // not a hook table in this torch version
    if (PyDict_GET_SIZE(hooks.get()) != 0) {
      return make_error(std::string("torch has global module hooks (") + kGlobalHooksModule + "." +
                        name + ")");
    }
    payload.dicts.push_back(std::move(hooks));
    payload.names.emplace_back(name);
  }
  return add(GuardKind::NoGlobalHooks, nullptr, std::move(payload), "");
}

Expected<size_t> GuardSet::add_no_hooks(const SourcePtr& module_source, PyObject* module) {
  PyObject* dict = instance_dict(module);  // borrowed
  if (dict == nullptr) return make_error("a " + type_name(Py_TYPE(module)) + " has no __dict__");
  NoHooksPayload payload;
  payload.dict_version = dict_version(dict);
  for (const char* name : kModuleHookNames) {
    HookDict hook;
    hook.name = PyRef::steal(PyUnicode_InternFromString(name));  // new
    if (!hook.name) {
      PyErr_Clear();
      return make_error("out of memory");
    }
    PyObject* hooks = PyDict_GetItemWithError(dict, hook.name.get());  // borrowed
    if (hooks == nullptr && PyErr_Occurred()) PyErr_Clear();
    if (hooks != nullptr) {
      if (!PyDict_Check(hooks)) return make_error(std::string(name) + " is not a dict");
      if (PyDict_GET_SIZE(hooks) != 0) {
        return make_error(std::string("the module has hooks (") + name + ")");
      }
      hook.dict = PyRef::borrow(hooks);
    }
    payload.hooks.push_back(std::move(hook));
  }
  Expected<size_t> global = add_no_global_hooks();
  if (!global) return global;
  return add(GuardKind::NoHooks, module_source, std::move(payload), "");
}

size_t GuardSet::add_grad_mode(bool enabled) {
  return *add(GuardKind::GradMode, nullptr, GradModePayload{enabled},
              std::string(" torch.is_grad_enabled() == ") + python_bool(enabled));
}

size_t GuardSet::add_default_dtype() {
  int8_t dtype = default_dtype();
  return *add(GuardKind::DefaultDtype, nullptr, DefaultDtypePayload{dtype},
              " torch.get_default_dtype() == torch." + dtype_name(dtype));
}

size_t GuardSet::add_autocast() {
  AutocastState state = autocast_state();
  return *add(GuardKind::Autocast, nullptr, AutocastPayload{state}, " " + vm::to_string(state));
}

Expected<size_t> GuardSet::add_warning_filters() {
  ErrorStash stash;
  PyRef name = PyRef::steal(PyUnicode_FromString("warnings"));
  PyRef module = PyRef::steal(name ? PyImport_GetModule(name.get()) : nullptr);
  PyRef filters = PyRef::steal(module ? PyObject_GetAttrString(module.get(), "filters") : nullptr);
  PyRef action =
      PyRef::steal(module ? PyObject_GetAttrString(module.get(), "defaultaction") : nullptr);
  if (!filters || !action || !PyList_CheckExact(filters.get()) ||
      !PyUnicode_CheckExact(action.get())) {
    PyErr_Clear();
    return make_error("warnings.filters is not a list or warnings.defaultaction not a str");
  }
  WarningFiltersPayload payload{module, PyRef::steal(PyList_AsTuple(filters.get())), action};
  if (!payload.filters) return make_error("copying warnings.filters: " + take_error_text());
  std::string text = " " + std::to_string(PyTuple_GET_SIZE(payload.filters.get())) +
                     " filters, default action " + repr_text(action.get());
  return add(GuardKind::WarningFilters, nullptr, std::move(payload), text);
}

Expected<size_t> GuardSet::make_tensor_symbolic(const SourcePtr& source, std::vector<SymDim> dims) {
  int slot = sources_.find(source->to_string());
  auto it = index_.find({static_cast<int>(GuardKind::TensorMatch), slot});
  if (slot < 0 || it == index_.end() || it->second.empty()) {
    return make_error("no TENSOR_MATCH guard on " + source->to_string());
  }
  size_t index = it->second.front();
  Guard& guard = guards_[index];
  TensorSpec& spec = std::get<TensorMatchPayload>(guard.payload).spec;
  for (const SymDim& d : dims) {
    std::vector<int64_t>& fixed = d.stride ? spec.strides : spec.sizes;
    if (static_cast<size_t>(d.dim) < fixed.size()) fixed[static_cast<size_t>(d.dim)] = -1;
  }
  spec.symbolic = std::move(dims);
  guard.text = std::string(guard_kind_name(GuardKind::TensorMatch)) + " " + sources_[slot].text +
               ": " + vm::to_string(spec);
  return index;
}

size_t GuardSet::add_shape_relations(ShapeRelationsPayload payload) {
  std::string detail;
  for (const graph::SymRelation& r : payload.relations) {
    detail += (detail.empty() ? " " : ", ") + r.to_string();
  }
  return *add(GuardKind::ShapeRelations, nullptr, std::move(payload), detail);
}

std::vector<std::string> GuardSet::lines() const {
  std::vector<std::string> result;
  result.reserve(guards_.size());
  for (const Guard& guard : guards_) result.push_back(guard.text);
  return result;
}

std::string GuardSet::to_string() const {
  std::string text;
  for (const Guard& guard : guards_) text += guard.text + "\n";
  return text;
}

}  // namespace dynvm::vm
