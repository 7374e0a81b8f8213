// The guard interpreter: a fast check per kind, and, only when asked, the verbose check that
// says why a guard failed.
#include "dynvm/vm/guard_eval.h"

#include <algorithm>

#include "python_values.h"

namespace dynvm::vm {

namespace {

// len(value) for a value whose type is already checked; -1 (no error set) when it fails.
Py_ssize_t length_of(PyObject* value) {
  if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) return Py_SIZE(value);
  if (PyDict_CheckExact(value)) return PyDict_GET_SIZE(value);
  Py_ssize_t length = PyObject_Size(value);  // ModuleList, Sequential, ...: may run __len__
  if (length < 0) PyErr_Clear();
  return length;
}

bool len_matches(const LenMatchPayload& payload, PyObject* value) {
  return reinterpret_cast<PyObject*>(Py_TYPE(value)) == payload.type.get() &&
         length_of(value) == payload.length;
}

// `value` is of the recorded dict type; compares its keys in iteration order.
bool dict_keys_match(const DictKeysPayload& payload, PyObject* value) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(value)) != payload.type.get()) return false;
  PyObject* keys = payload.keys.get();  // a tuple
  Py_ssize_t count = PyTuple_GET_SIZE(keys);
  if (PyDict_GET_SIZE(value) != count) return false;
  // An exact dict's keys and their order change only with its version tag.
  const uint64_t version = dict_version(value);
  if (value == payload.matched && version == payload.matched_version) return true;
  auto matched = [&] {
    payload.matched = value;
    payload.matched_version = version;
    return true;
  };
  if (PyDict_CheckExact(value)) {
    Py_ssize_t position = 0;
    PyObject* key = nullptr;  // borrowed
    for (Py_ssize_t i = 0; PyDict_Next(value, &position, &key, nullptr); ++i) {
      if (i >= count || !constant_matches(key, PyTuple_GET_ITEM(keys, i))) return false;
    }
    return matched();
  }
  // Subclasses (OrderedDict) iterate in their own order.
  PyRef iterator = PyRef::steal(PyObject_GetIter(value));  // new
  if (!iterator) {
    PyErr_Clear();
    return false;
  }
  for (Py_ssize_t i = 0;; ++i) {
    PyRef key = PyRef::steal(PyIter_Next(iterator.get()));  // new
    if (!key) {
      if (PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      // Not remembered: a subclass's order may change with no store into the dict
      // (OrderedDict.move_to_end keeps the version tag).
      return i == count;
    }
    if (i >= count || !constant_matches(key.get(), PyTuple_GET_ITEM(keys, i))) return false;
  }
}

// Whether the module has no hooks; with `which`, names the first non-empty hook dict.
bool module_has_no_hooks(const NoHooksPayload& payload, PyObject* module, std::string* which) {
  PyObject* dict = instance_dict(module);  // borrowed
  if (dict == nullptr) {
    if (which != nullptr) *which = "has no __dict__";
    return false;
  }
  if (dict_version(dict) == payload.dict_version) {
    // The same dict, unmodified: the hook dicts bound now are those read at trace time.
    for (const HookDict& hook : payload.hooks) {
      if (hook.dict && PyDict_GET_SIZE(hook.dict.get()) != 0) {
        if (which != nullptr) *which = "has hooks in " + repr_text(hook.name.get());
        return false;
      }
    }
    return true;
  }
  std::vector<PyObject*> found(payload.hooks.size(), nullptr);  // borrowed
  for (size_t i = 0; i < payload.hooks.size(); ++i) {
    const HookDict& hook = payload.hooks[i];
    PyObject* hooks = PyDict_GetItemWithError(dict, hook.name.get());  // borrowed
    if (hooks == nullptr) {
      if (!PyErr_Occurred()) continue;
      PyErr_Clear();
      if (which != nullptr) *which = "has an unreadable __dict__";
      return false;
    }
    if (!PyDict_Check(hooks) || PyDict_GET_SIZE(hooks) != 0) {
      if (which != nullptr) *which = "has hooks in " + repr_text(hook.name.get());
      return false;
    }
    found[i] = hooks;
  }
  // The dict as read now: the next check with this version needs only the sizes.
  for (size_t i = 0; i < payload.hooks.size(); ++i) {
    payload.hooks[i].dict = found[i] != nullptr ? PyRef::borrow(found[i]) : PyRef();
  }
  payload.dict_version = dict_version(dict);
  return true;
}

// Whether the module's constant attributes are still the recorded ones; with `which`, says
// what differs.
bool module_attrs_match(const ModuleAttrsPayload& payload, PyObject* module, std::string* which);

bool no_global_hooks(const NoGlobalHooksPayload& payload, std::string* which) {
  for (size_t i = 0; i < payload.dicts.size(); ++i) {
    if (PyDict_GET_SIZE(payload.dicts[i].get()) != 0) {
      if (which != nullptr)
        *which = "torch.nn.modules.module." + payload.names[i] + " is not empty";
      return false;
    }
  }
  return true;
}

// Whether every relation holds over the symbols the tensor guards bound; `which` (when
// given) says which one failed, with the values of its symbols and where they were read.
bool shape_relations_hold(const ShapeRelationsPayload& payload, std::string* which) {
  const std::vector<int64_t>& values = bound_symbols();
  for (const graph::SymRelation& r : payload.relations) {
    std::optional<bool> holds = r.holds(values);
    if (holds == true) continue;
    if (which != nullptr) {
      *which = r.to_string() + " is false";
      std::vector<int32_t> symbols = r.lhs.symbols();
      for (int32_t s : r.rhs.symbols()) symbols.push_back(s);
      std::sort(symbols.begin(), symbols.end());
      symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
      for (size_t i = 0; i < symbols.size(); ++i) {
        auto s = static_cast<size_t>(symbols[i]);
        *which += (i == 0 ? " with " : ", ") + ("s" + std::to_string(s)) + " = " +
                  (s < values.size() ? std::to_string(values[s]) : std::string("?")) +
                  (s < payload.symbol_sources.size() ? " (" + payload.symbol_sources[s] + ")"
                                                     : std::string());
      }
    }
    return false;
  }
  return true;
}

// Whether warnings' filters and default action are still the recorded ones; with `which`,
// says what differs. A filter is compared as a tuple: by identity first, then with ==
// (the same action, category, line and the same message and module patterns).
bool warning_filters_match(const WarningFiltersPayload& payload, std::string* which) {
  PyObject* module_dict = PyModule_GetDict(payload.module.get());  // borrowed
  PyObject* filters = module_dict ? PyDict_GetItemString(module_dict, "filters") : nullptr;
  PyObject* action = module_dict ? PyDict_GetItemString(module_dict, "defaultaction") : nullptr;
  PyObject* recorded = payload.filters.get();
  if (filters == nullptr || !PyList_CheckExact(filters) ||
      PyList_GET_SIZE(filters) != PyTuple_GET_SIZE(recorded)) {
    if (which != nullptr) *which = "warnings.filters changed (another number of filters)";
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(recorded); ++i) {
    PyObject* now = PyList_GET_ITEM(filters, i);
    PyObject* then = PyTuple_GET_ITEM(recorded, i);
    if (now == then) continue;
    int same = PyObject_RichCompareBool(now, then, Py_EQ);
    if (same < 0) PyErr_Clear();
    if (same != 1) {
      if (which != nullptr) *which = "warnings.filters[" + std::to_string(i) + "] changed";
      return false;
    }
  }
  if (action == nullptr || !PyUnicode_Check(action) ||
      PyUnicode_Compare(action, payload.default_action.get()) != 0) {
    if (PyErr_Occurred()) PyErr_Clear();
    if (which != nullptr) *which = "warnings.defaultaction changed";
    return false;
  }
  return true;
}

}  // namespace

bool guard_check(const Guard& guard, PyObject* value) {
  switch (guard.kind) {
    case GuardKind::TypeMatch:
      return reinterpret_cast<PyObject*>(Py_TYPE(value)) == guard.as<TypeMatchPayload>().type.get();
    case GuardKind::IdMatch:  // get(): nullptr once the object is gone
      return value == guard.as<IdMatchPayload>().object.get();
    case GuardKind::ConstantMatch:
      return constant_matches(value, guard.as<ConstantMatchPayload>().value.get());
    case GuardKind::TensorMatch:
      return tensor_matches(guard.as<TensorMatchPayload>().spec, value);
    case GuardKind::LenMatch:
      return len_matches(guard.as<LenMatchPayload>(), value);
    case GuardKind::DictKeys:
      return dict_keys_match(guard.as<DictKeysPayload>(), value);
    case GuardKind::DictVersion:
      return PyDict_Check(value) && dict_version(value) == guard.as<DictVersionPayload>().version;
    case GuardKind::NoHooks:
      return module_has_no_hooks(guard.as<NoHooksPayload>(), value, nullptr);
    case GuardKind::ModuleAttrs:
      return module_attrs_match(guard.as<ModuleAttrsPayload>(), value, nullptr);
    case GuardKind::DuplicateInput:
      return false;  // over two sources: guards_hold and the compiled guards compare them
    case GuardKind::NoGlobalHooks:
      return no_global_hooks(guard.as<NoGlobalHooksPayload>(), nullptr);
    case GuardKind::GradMode:
      return grad_mode_enabled() == guard.as<GradModePayload>().enabled;
    case GuardKind::DefaultDtype:
      return default_dtype() == guard.as<DefaultDtypePayload>().dtype;
    case GuardKind::Autocast:
      return autocast_state() == guard.as<AutocastPayload>().state;
    case GuardKind::ShapeRelations:
      return shape_relations_hold(guard.as<ShapeRelationsPayload>(), nullptr);
    case GuardKind::WarningFilters:
      return warning_filters_match(guard.as<WarningFiltersPayload>(), nullptr);
  }
  return false;
}

namespace {

// "a Linear", or the value itself for builtin constants (whose repr runs no user code).
std::string value_text(PyObject* value) {
  if (is_guardable_constant(value)) return repr_text(value);
  return "a " + type_name(Py_TYPE(value));
}

const char* python_bool(bool value) { return value ? "True" : "False"; }

bool module_attrs_match(const ModuleAttrsPayload& payload, PyObject* module, std::string* which) {
  PyTypeObject* type = Py_TYPE(module);
  if (reinterpret_cast<PyObject*>(type) != payload.type.get()) {
    if (which != nullptr) *which = " is " + value_text(module);
    return false;
  }
  PyObject* dict = instance_dict(module);  // borrowed
  const uint64_t version = dict != nullptr ? dict_version(dict) : 0;
  if (payload.type_version != 0 && type_version(type) == payload.type_version) {
    // The same dict, unmodified, under the same type: every attribute is the recorded object.
    if (dict != nullptr && version == payload.dict_version) return true;
  }
  for (const ModuleAttr& attr : payload.attrs) {
    PyRef now = PyRef::steal(PyObject_GetAttr(module, attr.name.get()));  // new
    if (!now) {
      if (which != nullptr) {
        *which = "." + std::string(PyUnicode_AsUTF8(attr.name.get())) +
                 " could not be read: " + take_error_text();
      }
      PyErr_Clear();
      return false;
    }
    bool same = attr.by_identity ? now.get() == attr.value.get()
                                 : constant_matches(now.get(), attr.value.get());
    if (!same) {
      if (which != nullptr) {
        *which = "." + std::string(PyUnicode_AsUTF8(attr.name.get())) + " is " +
                 value_text(now.get()) + ", expected " + repr_text(attr.value.get());
      }
      return false;
    }
  }
  // Every attribute read as recorded: while the type and the dict keep these versions, they
  // still are (unless the reads themselves changed the dict).
  const unsigned int now = type_version(type);
  if (now != 0 && dict != nullptr && instance_dict(module) == dict &&
      dict_version(dict) == version) {
    payload.type_version = now;
    payload.dict_version = version;
  }
  return true;
}

// The verbose check: what `value` (borrowed) was, for a guard whose fast check failed.
// `where` is the source's text.
std::string explain(const Guard& guard, PyObject* value, const std::string& where) {
  switch (guard.kind) {
    case GuardKind::TypeMatch:
      return where + " is " + value_text(value);
    case GuardKind::IdMatch:
      return where + " is another object (" + value_text(value) + ")";
    case GuardKind::ConstantMatch:
      return where + " is " + value_text(value);
    case GuardKind::TensorMatch:
      return where + " " + tensor_mismatch(guard.as<TensorMatchPayload>().spec, value);
    case GuardKind::LenMatch: {
      const auto& payload = guard.as<LenMatchPayload>();
      if (reinterpret_cast<PyObject*>(Py_TYPE(value)) != payload.type.get()) {
        return where + " is " + value_text(value);
      }
      return where + " has len " + std::to_string(length_of(value));
    }
    case GuardKind::DictKeys: {
      const auto& payload = guard.as<DictKeysPayload>();
      if (reinterpret_cast<PyObject*>(Py_TYPE(value)) != payload.type.get()) {
        return where + " is " + value_text(value);
      }
      PyRef keys = PyRef::steal(PySequence_List(value));  // new
      if (!keys) {
        PyErr_Clear();
        return where + " has other keys";
      }
      PyRef tuple = PyRef::steal(PyList_AsTuple(keys.get()));  // new
      if (!tuple || !is_guardable_constant(tuple.get())) {
        PyErr_Clear();
        return where + " has other keys";
      }
      return where + " has keys " + repr_text(keys.get());
    }
    case GuardKind::DictVersion:
      if (!PyDict_Check(value)) return where + " is " + value_text(value);
      return where + " was modified (or replaced) since the trace";
    case GuardKind::NoHooks: {
      std::string which;
      module_has_no_hooks(guard.as<NoHooksPayload>(), value, &which);
      return where + " " + which;
    }
    case GuardKind::ModuleAttrs: {
      std::string which;
      module_attrs_match(guard.as<ModuleAttrsPayload>(), value, &which);
      return where + which;
    }
    case GuardKind::DuplicateInput:
      return where + " is another object (" + value_text(value) + ")";
    case GuardKind::NoGlobalHooks: {
      std::string which;
      no_global_hooks(guard.as<NoGlobalHooksPayload>(), &which);
      return which;
    }
    case GuardKind::GradMode:
      return std::string("torch.is_grad_enabled() is ") + python_bool(grad_mode_enabled());
    case GuardKind::DefaultDtype:
      return "torch.get_default_dtype() is torch." + dtype_name(default_dtype());
    case GuardKind::Autocast: {
      return "autocast is " + to_string(autocast_state());
    }
    case GuardKind::ShapeRelations: {
      std::string which;
      shape_relations_hold(guard.as<ShapeRelationsPayload>(), &which);
      return which;
    }
    case GuardKind::WarningFilters: {
      std::string which;
      warning_filters_match(guard.as<WarningFiltersPayload>(), &which);
      return which;
    }
  }
  return "";
}

void fail(GuardFailure* why, size_t index, const Guard& guard, std::string reason) {
  why->index = index;
  why->guard = guard.text;
  why->reason = std::move(reason);
}

}  // namespace

std::string to_string(const GuardFailure& failure) {
  return failure.guard + " failed: " + failure.reason;
}

bool guards_hold(const GuardSet& guards, const FrameInputs& inputs, GuardFailure* why) {
  ErrorStash stash;
  try {
    SourceResolver resolver(guards.sources(), inputs, /*explain=*/why != nullptr);
    const std::vector<Guard>& list = guards.guards();
    for (size_t i = 0, count = list.size(); i < count; ++i) {
      const Guard& guard = list[i];
      PyObject* value = nullptr;  // borrowed from the resolver
      if (guard.source >= 0) {
        value = resolver.resolve(guard.source);
        if (value == nullptr) {
          if (why != nullptr) {
            int slot = resolver.failed_slot() >= 0 ? resolver.failed_slot() : guard.source;
            fail(why, i, guard,
                 guards.sources()[slot].text + " could not be read: " + resolver.failure());
          }
          return false;
        }
      }
      bool holds;
      if (guard.kind == GuardKind::DuplicateInput) {
        // The one guard over two sources: the first was read by an earlier guard.
        PyObject* first = resolver.resolve(guard.as<DuplicateInputPayload>().first);
        holds = first != nullptr && value == first;
      } else {
        holds = guard_check(guard, value);
      }
      if (!holds) {
        if (why != nullptr) {
          fail(why, i, guard,
               explain(guard, value, guard.source >= 0 ? guards.sources()[guard.source].text : ""));
        }
        return false;
      }
    }
    return true;
  } catch (...) {
    return false;  // bad_alloc while explaining; the stash drops any Python error
  }
}

}  // namespace dynvm::vm
