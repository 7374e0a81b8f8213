// copy.copy and copy.deepcopy of traced values (see copies.h). The copy module itself is
// stdlib Python the VM would otherwise inline: its dispatch tables are not guardable, and
// what it does for the values modelled here is simple to state.
#include "copies.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "known_objects.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

namespace {

PyObject* type_attribute(PyObject* type, const char* name) {  // borrowed or null
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name));
  return _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), key.get());
}

// Whether copying an instance of `type` goes the default way: object.__reduce_ex__, its
// __dict__ copied into a new instance made by __new__ alone.
bool copies_by_default(PyObject* type, bool deep) {
  auto* object_type = reinterpret_cast<PyObject*>(&PyBaseObject_Type);
  for (const char* name : {"__reduce_ex__", "__reduce__", "__getstate__", "__setstate__",
                           "__getnewargs_ex__", "__getnewargs__", "__slots__"}) {
    if (type_attribute(type, name) != type_attribute(object_type, name)) return false;
  }
  if (type_attribute(type, deep ? "__deepcopy__" : "__copy__") != nullptr) return false;
  // copyreg.pickle() may register a reducer for the class.
  PyRef copyreg = PyRef::steal(PyImport_ImportModule("copyreg"));
  PyRef table =
      copyreg ? PyRef::steal(PyObject_GetAttrString(copyreg.get(), "dispatch_table")) : PyRef();
  if (!table || !PyDict_Check(table.get())) {
    PyErr_Clear();
    return false;
  }
  return PyDict_GetItemWithError(table.get(), type) == nullptr && !PyErr_Occurred();
}

class Copier {
 public:
  Copier(TraceContext& ctx, bool deep) : ctx_(ctx), deep_(deep) {}

  ValuePtr copy(const ValuePtr& value) {
    if (++depth_ > 64) unsupported("copying a structure nested 64 deep (a cycle?)");
    // Deep copies keep shared references shared (copy.deepcopy's memo).
    const void* identity = value->obj ? static_cast<const void*>(value->obj.get())
                                      : static_cast<const void*>(value.get());
    if (deep_) {
      auto found = memo_.find(identity);
      if (found != memo_.end()) {
        --depth_;
        return found->second;
      }
    }
    ValuePtr copied = make(value);
    if (deep_) memo_.emplace(identity, copied);
    --depth_;
    return copied;
  }

 private:
  ValuePtr inner(const ValuePtr& value) { return deep_ ? copy(value) : value; }

  std::vector<ValuePtr> inner_all(const std::vector<ValuePtr>& values) {
    std::vector<ValuePtr> out;
    out.reserve(values.size());
    for (const ValuePtr& v : values) out.push_back(inner(v));
    return out;
  }

  ValuePtr make(const ValuePtr& value) {
    switch (value->kind) {
      case TracedValue::Kind::Constant: {
        PyObject* o = value->py();
        if (value->mutable_here || (PyAnySet_Check(o) && !PyFrozenSet_Check(o))) {
          unsupported("copying a set");
        }
        return value;  // immutable: both copies return it as it is
      }
      case TracedValue::Kind::Tensor:
        if (deep_) unsupported("copy.deepcopy of a tensor");
        return value;
      case TracedValue::Kind::Tuple: {
        if (value->is_size || !deep_) return value;
        std::vector<ValuePtr> items = inner_all(value->items);
        bool same = true;
        for (size_t i = 0; i < items.size(); ++i) same = same && items[i] == value->items[i];
        if (same) return value;  // deepcopy returns a tuple of atoms itself
        ValuePtr copied = TracedValue::tuple(std::move(items));
        copied->class_value = value->class_value;
        return copied;
      }
      case TracedValue::Kind::List:
        return TracedValue::list(inner_all(value->items), true);
      case TracedValue::Kind::Dict: {
        if (value->class_value == nullptr && value->obj && !PyDict_CheckExact(value->obj.get()) &&
            !is_ordered_dict_object(value->obj.get())) {
          unsupported("copying a dict subclass");
        }
        ValuePtr copied = TracedValue::dict(value->keys, inner_all(value->items), true);
        PyObject* type = value->dict_class();
        if (type != reinterpret_cast<PyObject*>(&PyDict_Type)) {
          copied->class_value = TracedValue::object(PyRef::borrow(type));
        }
        return copied;
      }
      case TracedValue::Kind::Object:
        return copy_object(value);
      case TracedValue::Kind::NewObject:
        return copy_new_object(value);
      default:
        unsupported("copying a " + value->describe());
    }
  }

  static bool is_ordered_dict_object(PyObject* o) {
    return PyObject_TypeCheck(
        o, reinterpret_cast<PyTypeObject*>(KnownObjects::get()->ordered_dict_type.get()));
  }

  // An object that existed before the call: classes, functions and other atoms are
  // themselves; an instance of a plain class becomes a NewObject with a copy of its __dict__,
  // read (and guarded) from the original.
  ValuePtr copy_object(const ValuePtr& value) {
    PyObject* o = value->py();
    if (PyType_Check(o) || PyFunction_Check(o) || PyCFunction_Check(o) || o == Py_None ||
        o == Py_Ellipsis || o == Py_NotImplemented) {
      return value;
    }
    if (is_module(o)) unsupported("copying an nn.Module");
    PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(o));
    if (!value->source || !is_traceable_user_class(type) || builtin_dict_base(type) != nullptr ||
        !has_instance_dict(type) || !copies_by_default(type, deep_)) {
      unsupported("copying a " + value->describe());
    }
    PyRef dict = PyRef::steal(PyObject_GenericGetDict(o, nullptr));
    if (!dict) unsupported_from_python_error("the __dict__ of a " + value->describe());
    ValuePtr state = ctx_.wrap(dict.get(), Source::attr(value->source, "__dict__"));
    ValuePtr class_value = ctx_.wrap(type, Source::attr(value->source, "__class__"));
    return instance(class_value, state);
  }

  ValuePtr copy_new_object(const ValuePtr& value) {
    PyObject* type = value->class_value->py();
    if (value->mapping_items || !copies_by_default(type, deep_)) {
      unsupported("copying a " + value->describe());
    }
    return instance(value->class_value, value->instance_dict);
  }

  // cls.__new__(cls) given a copy of `state` as its __dict__, as copy's _reconstruct does.
  ValuePtr instance(const ValuePtr& class_value, const ValuePtr& state) {
    auto made = std::make_shared<TracedValue>();
    made->kind = TracedValue::Kind::NewObject;
    made->class_value = class_value;
    made->mutable_here = true;
    std::vector<ValuePtr> values = inner_all(state->items);
    made->instance_dict = TracedValue::dict(state->keys, std::move(values), true);
    return made;
  }

  TraceContext& ctx_;
  bool deep_;
  int depth_ = 0;
  std::map<const void*, ValuePtr> memo_;
};

}  // namespace

ValuePtr copy_value(TraceContext& ctx, const ValuePtr& value, bool deep) {
  return Copier(ctx, deep).copy(value);
}

}  // namespace dynvm::vm
