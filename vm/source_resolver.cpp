// Numbering a guard set's sources and reading them from a live call, each once per check.
#include "dynvm/vm/source_resolver.h"

#include <utility>

#include "python_values.h"

namespace dynvm::vm {

namespace {

// New reference: an interned str of `text`, or nullptr with a Python error set.
PyObject* interned(const std::string& text) {
  PyObject* name = PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
  if (name != nullptr) PyUnicode_InternInPlace(&name);
  return name;
}

const char* member_container(Source::Kind kind) {
  switch (kind) {
    case Source::Kind::ModuleParam:
      return "_parameters";
    case Source::Kind::ModuleBuffer:
      return "_buffers";
    default:
      return "_modules";
  }
}

bool is_root(Source::Kind kind) {
  return kind == Source::Kind::Local || kind == Source::Kind::Closure ||
         kind == Source::Kind::Stack || kind == Source::Kind::Global ||
         kind == Source::Kind::Builtin || kind == Source::Kind::Module;
}

}  // namespace

bool is_sequence_iterator(PyObject* object) {
  static PyTypeObject* list_iterator = nullptr;
  static PyTypeObject* tuple_iterator = nullptr;
  if (list_iterator == nullptr) {
    PyRef list = PyRef::steal(PyList_New(0));
    PyRef tuple = PyRef::steal(PyTuple_New(0));
    PyRef a = PyRef::steal(PyObject_GetIter(list.get()));
    PyRef b = PyRef::steal(PyObject_GetIter(tuple.get()));
    if (!a || !b) {
      PyErr_Clear();
      return false;
    }
    list_iterator = Py_TYPE(a.get());  // static types: never freed
    tuple_iterator = Py_TYPE(b.get());
  }
  return Py_TYPE(object) == list_iterator || Py_TYPE(object) == tuple_iterator;
}

PyObject* iterator_rest(PyObject* iterator, PyObject** sequence) {
  if (sequence != nullptr) *sequence = nullptr;
  if (!is_sequence_iterator(iterator)) {
    PyErr_SetString(PyExc_TypeError, "not a list or tuple iterator");
    return nullptr;
  }
  // (iter, (sequence,), index) while it has a sequence; (iter, (empty,)) once exhausted.
  PyRef reduced = PyRef::steal(PyObject_CallMethod(iterator, "__reduce__", nullptr));
  if (!reduced) return nullptr;
  if (!PyTuple_Check(reduced.get()) || PyTuple_GET_SIZE(reduced.get()) < 2 ||
      !PyTuple_Check(PyTuple_GET_ITEM(reduced.get(), 1)) ||
      PyTuple_GET_SIZE(PyTuple_GET_ITEM(reduced.get(), 1)) != 1) {
    PyErr_SetString(PyExc_TypeError, "an iterator's __reduce__ of an unknown form");
    return nullptr;
  }
  PyObject* walked = PyTuple_GET_ITEM(PyTuple_GET_ITEM(reduced.get(), 1), 0);  // borrowed
  Py_ssize_t index = 0;
  if (PyTuple_GET_SIZE(reduced.get()) >= 3) {
    if (sequence != nullptr) *sequence = walked;  // held by the iterator itself
    index = PyLong_AsSsize_t(PyTuple_GET_ITEM(reduced.get(), 2));
    if (index < 0 && PyErr_Occurred()) return nullptr;
  }
  PyRef items = PyRef::steal(PySequence_Tuple(walked));
  if (!items) return nullptr;
  Py_ssize_t size = PyTuple_GET_SIZE(items.get());
  if (index > size) index = size;
  return PyTuple_GetSlice(items.get(), index, size);
}

int SourceTable::intern(const SourcePtr& source) {
  if (!source) return -1;
  std::string text = source->to_string();
  auto found = slots_.find(text);
  if (found != slots_.end()) return found->second;

  Entry entry;
  entry.source = source;
  entry.text = text;
  Source::Kind kind = source->kind();
  entry.kind = kind;
  entry.index = source->index();
  if (is_root(kind) != (source->base() == nullptr)) return -1;  // a malformed chain
  if (source->base()) {
    entry.base = intern(source->base());
    if (entry.base < 0) return -1;
  }
  switch (kind) {
    case Source::Kind::Local:
    case Source::Kind::Closure:
    case Source::Kind::Stack:
    case Source::Kind::WeakrefTarget:
      break;
    case Source::Kind::Global:
    case Source::Kind::Builtin:
    case Source::Kind::Module:
    case Source::Kind::Attr:
    case Source::Kind::Key:
      entry.key = PyRef::steal(interned(source->name()));
      if (!entry.key) break;
      entry.is_dict_attr = kind == Source::Kind::Attr && source->name() == "__dict__";
      entry.is_class_attr = kind == Source::Kind::Attr && source->name() == "__class__";
      entry.is_iterator_rest = kind == Source::Kind::Attr && source->name() == kIteratorRest;
      break;
    case Source::Kind::ModuleParam:
    case Source::Kind::ModuleBuffer:
    case Source::Kind::ModuleChild:
      entry.key = PyRef::steal(interned(source->name()));
      entry.container = PyRef::steal(interned(member_container(kind)));
      if (!entry.container) entry.key = PyRef();
      break;
    case Source::Kind::BytesKey:
      entry.key = PyRef::steal(PyBytes_FromStringAndSize(
          source->name().data(), static_cast<Py_ssize_t>(source->name().size())));
      break;
    case Source::Kind::Index:
    case Source::Kind::DictValue:
      entry.key = PyRef::steal(PyLong_FromLongLong(static_cast<long long>(source->index())));
      break;
  }
  bool needs_key = kind != Source::Kind::Local && kind != Source::Kind::Closure &&
                   kind != Source::Kind::Stack && kind != Source::Kind::WeakrefTarget;
  if (needs_key && !entry.key) {
    PyErr_Clear();
    return -1;
  }
  int slot = static_cast<int>(entries_.size());
  entries_.push_back(std::move(entry));
  slots_.emplace(std::move(text), slot);
  return slot;
}

int SourceTable::find(const std::string& text) const {
  auto found = slots_.find(text);
  return found == slots_.end() ? -1 : found->second;
}

SourceResolver::SourceResolver(const SourceTable& table, const FrameInputs& inputs, bool explain)
    : table_(table), inputs_(inputs), memo_(inline_memo_), explain_(explain) {
  size_t count = table.size();
  if (count > kInlineSlots) {
    heap_memo_.reset(new Memo[count]);
    memo_ = heap_memo_.get();
  }
  for (size_t i = 0; i < count; ++i) memo_[i] = Memo{nullptr, kUnresolved};
}

SourceResolver::~SourceResolver() {
  for (size_t i = 0, count = table_.size(); i < count; ++i) {
    if (memo_[i].state == kResolved) Py_DECREF(memo_[i].value);
  }
}

PyObject* SourceResolver::resolve(int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= table_.size()) return nullptr;
  Memo& memo = memo_[slot];
  if (memo.state == kResolved) return memo.value;
  if (memo.state == kFailed) return nullptr;
  const SourceTable::Entry& entry = table_[slot];
  PyObject* base = nullptr;  // borrowed from the memo
  if (entry.base >= 0) {
    base = resolve(entry.base);
    if (base == nullptr) {
      memo.state = kFailed;
      return nullptr;
    }
  }
  PyObject* value = read_source_entry(entry, base, inputs_);  // new
  if (value == nullptr) {
    memo.state = kFailed;
    note_failure(slot);
    return nullptr;
  }
  memo.value = value;
  memo.state = kResolved;
  return value;
}

namespace {

using LastRead = SourceTable::Entry::LastRead;

// dict[key] (a new reference, or nullptr) for a root or key source, through `last`: the
// value read before while `dict` is that dict, unmodified.
PyObject* cached_dict_item(LastRead& last, PyObject* dict, PyObject* key) {
  if (dict == nullptr || !PyDict_Check(dict)) return nullptr;
  const uint64_t version = dict_version(dict);
  if (last.value != nullptr && dict == last.outer && version == last.outer_version) {
    return Py_NewRef(last.value);
  }
  PyObject* value = PyDict_GetItemWithError(dict, key);  // borrowed
  last = LastRead{};
  if (value == nullptr) return nullptr;
  last.outer = dict;
  last.outer_version = version;
  last.value = value;
  return Py_NewRef(value);
}

// base.__dict__[container][name] (new reference, or nullptr), as nn.Module.__getattr__ finds
// a parameter, buffer or child module, minus the Python-level call.
PyObject* module_member(LastRead& last, PyObject* base, PyObject* container, PyObject* key) {
  PyObject* dict = instance_dict(base);  // borrowed
  if (dict == nullptr) return nullptr;
  const uint64_t version = dict_version(dict);
  if (last.value != nullptr && dict == last.outer && version == last.outer_version &&
      dict_version(last.inner) == last.inner_version) {
    return Py_NewRef(last.value);
  }
  last = LastRead{};
  PyObject* members = PyDict_GetItemWithError(dict, container);  // borrowed
  if (members == nullptr || !PyDict_Check(members)) return nullptr;
  PyObject* value = PyDict_GetItemWithError(members, key);  // borrowed
  if (value == nullptr) return nullptr;
  last = LastRead{dict, version, members, dict_version(members), nullptr, 0, value};
  return Py_NewRef(value);
}

// getattr(base, name) (new reference, or nullptr), remembered where the attribute is
// determined by versioned state alone: an instance attribute of an object that reads
// attributes generically and whose class (and bases) define no attribute of that name, or a
// plain class attribute of a class (not a descriptor that makes a new object, such as a
// classmethod; functions read from a class are themselves).
PyObject* attribute(LastRead& last, PyObject* base, PyObject* name) {
  PyTypeObject* type = Py_TYPE(base);
  const bool is_class = type == &PyType_Type;
  PyTypeObject* owner = is_class ? reinterpret_cast<PyTypeObject*>(base) : type;
  if (last.value != nullptr && owner == last.type && last.type_version != 0 &&
      type_version(owner) == last.type_version) {
    // A class attribute was remembered with no dict (outer), an instance attribute with one.
    if (is_class) {
      if (last.outer == nullptr) return Py_NewRef(last.value);
    } else {
      PyObject* dict = instance_dict(base);  // borrowed
      if (dict != nullptr && dict == last.outer && dict_version(dict) == last.outer_version) {
        return Py_NewRef(last.value);
      }
    }
  }
  last = LastRead{};
  PyObject* value = PyObject_GetAttr(base, name);  // new
  if (value == nullptr) return nullptr;
  unsigned int version = type_version(owner);
  if (version == 0) return value;
  if (is_class) {
    if (_PyType_Lookup(&PyType_Type, name) == nullptr && _PyType_Lookup(owner, name) == value &&
        type_version(owner) == version) {
      last = LastRead{nullptr, 0, nullptr, 0, owner, version, value};
    }
    return value;
  }
  if (has_generic_getattribute(type) && _PyType_Lookup(type, name) == nullptr &&
      type_version(type) == version) {
    PyObject* dict = instance_dict(base);  // borrowed
    if (dict != nullptr && PyDict_GetItemWithError(dict, name) == value) {
      last = LastRead{dict, dict_version(dict), nullptr, 0, type, version, value};
    }
    PyErr_Clear();
  }
  return value;
}

}  // namespace

PyObject* read_source_entry(const SourceTable::Entry& entry, PyObject* base,
                            const FrameInputs& inputs_) {
  switch (entry.kind) {
    case Source::Kind::Local: {
      int64_t index = entry.index;
      if (inputs_.locals == nullptr || index < 0 || index >= inputs_.local_count) return nullptr;
      return Py_XNewRef(inputs_.locals[index]);  // borrowed -> new
    }
    case Source::Kind::Stack: {
      int64_t index = entry.index;
      if (inputs_.stack == nullptr || index < 0 || index >= inputs_.stack_count) return nullptr;
      return Py_XNewRef(inputs_.stack[index]);  // borrowed -> new
    }
    case Source::Kind::Closure: {
      PyObject* closure = inputs_.closure;
      int64_t index = entry.index;
      if (closure == nullptr || !PyTuple_Check(closure) || index < 0 ||
          index >= PyTuple_GET_SIZE(closure)) {
        return nullptr;
      }
      PyObject* cell = PyTuple_GET_ITEM(closure, index);  // borrowed
      if (!PyCell_Check(cell)) return nullptr;
      return Py_XNewRef(PyCell_GET(cell));  // borrowed (nullptr: empty cell) -> new
    }
    case Source::Kind::Global:
      return cached_dict_item(entry.last, inputs_.globals, entry.key.get());
    case Source::Kind::Builtin:
      return cached_dict_item(entry.last, inputs_.builtins, entry.key.get());
    case Source::Kind::Module:
      return PyImport_GetModule(entry.key.get());  // new, or nullptr when not imported
    case Source::Kind::Attr:
      if (entry.is_dict_attr) {
        PyObject* dict = instance_dict(base);  // borrowed
        if (dict != nullptr) return Py_NewRef(dict);
      }
      if (entry.is_class_attr) return Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(base)));
      if (entry.is_iterator_rest) return iterator_rest(base);
      return attribute(entry.last, base, entry.key.get());  // new
    case Source::Kind::ModuleParam:
    case Source::Kind::ModuleBuffer:
    case Source::Kind::ModuleChild:
      return module_member(entry.last, base, entry.container.get(), entry.key.get());
    case Source::Kind::Key:
    case Source::Kind::BytesKey:
      if (PyDict_CheckExact(base)) return cached_dict_item(entry.last, base, entry.key.get());
      return PyObject_GetItem(base, entry.key.get());  // new
    case Source::Kind::WeakrefTarget: {
      if (!PyWeakref_CheckRef(base)) return nullptr;
#if PY_VERSION_HEX >= 0x030D0000
      PyObject* target = nullptr;
      if (PyWeakref_GetRef(base, &target) < 0) return nullptr;
      return target != nullptr ? target : Py_NewRef(Py_None);  // None once dead
#else
      PyObject* target = PyWeakref_GetObject(base);  // borrowed; None once dead
      return target == nullptr ? nullptr : Py_NewRef(target);
#endif
    }
    case Source::Kind::DictValue: {
      if (!PyDict_Check(base)) return nullptr;
      Py_ssize_t position = 0;
      PyObject* value = nullptr;  // borrowed
      for (int64_t i = 0; PyDict_Next(base, &position, nullptr, &value); ++i) {
        if (i == entry.index) return Py_NewRef(value);
      }
      return nullptr;
    }
    case Source::Kind::Index:
      if (PyList_CheckExact(base) || PyTuple_CheckExact(base)) {
        Py_ssize_t size = Py_SIZE(base);
        Py_ssize_t index = static_cast<Py_ssize_t>(entry.index);
        if (index < 0) index += size;
        if (index < 0 || index >= size) return nullptr;
        return Py_NewRef(PyList_CheckExact(base) ? PyList_GET_ITEM(base, index)
                                                 : PyTuple_GET_ITEM(base, index));
      }
      return PyObject_GetItem(base, entry.key.get());  // new
  }
  return nullptr;
}

void SourceResolver::note_failure(int slot) {
  if (!explain_ || failed_slot_ >= 0) {
    if (PyErr_Occurred()) PyErr_Clear();
    return;
  }
  failed_slot_ = slot;
  failure_ = take_error_text();
  if (failure_.empty()) failure_ = "not found";
}

PyRef resolve_source(const SourcePtr& source, const FrameInputs& inputs) {
  ErrorStash stash;
  SourceTable table;
  int slot = table.intern(source);
  if (slot < 0) return PyRef();
  SourceResolver resolver(table, inputs);
  return PyRef::borrow(resolver.resolve(slot));
}

}  // namespace dynvm::vm
