// Instances of user classes made by the trace (NewObject): construction through the
// class's __init__, attributes, methods, properties and dunder methods — and the
// named tuples, OrderedDicts and functools.partial objects traced code builds.
#include <string>
#include <utility>

#include "inline_frame.h"
#include "known_objects.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

namespace {

PyObject* lookup_type_attr(PyObject* type, const std::string& name) {  // borrowed or null
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* found = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), key.get());
  return found;
}

ValuePtr bound(ValuePtr self, ValuePtr function) {
  auto m = std::make_shared<TracedValue>();
  m->kind = TracedValue::Kind::BoundMethod;
  m->self_value = std::move(self);
  m->function = std::move(function);
  return m;
}

}  // namespace

bool is_traceable_user_class(PyObject* type) {
  if (!PyType_Check(type)) return false;
  auto* t = reinterpret_cast<PyTypeObject*>(type);
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  // A metaclass may do anything when the class is called, unless it leaves that to type's
  // own __call__ (abc.ABCMeta: collections.abc bases, ABC).
  if (Py_TYPE(type) != &PyType_Type && Py_TYPE(type)->tp_call != PyType_Type.tp_call) return false;
  // object.__new__ refuses a class with abstract methods.
  if (t->tp_flags & Py_TPFLAGS_IS_ABSTRACT) return false;
  if (t->tp_new != PyBaseObject_Type.tp_new) return false;
  if (PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(PyExc_BaseException))) return false;
  if (t->tp_itemsize != 0) return false;
  // Only Python-level bases: builtin containers and C types keep state we do not model.
  PyObject* mro = t->tp_mro;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (base != &PyBaseObject_Type && !(base->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  }
  return !is_module(type);
}

bool has_instance_dict(PyObject* type) {
  auto* t = reinterpret_cast<PyTypeObject*>(type);
  return t->tp_dictoffset != 0 || (t->tp_flags & Py_TPFLAGS_MANAGED_DICT) != 0;
}

bool is_slot(PyObject* type, const std::string& name) {
  PyObject* found = lookup_type_attr(type, name);
  return found != nullptr && Py_TYPE(found) == &PyMemberDescr_Type;
}

ValuePtr new_object(TraceContext& ctx, const ValuePtr& class_value, std::vector<ValuePtr> args,
                    KwArgs kwargs) {
  if (!class_value->source) unsupported("creating an instance of a class with no source");
  auto obj = std::make_shared<TracedValue>();
  obj->kind = TracedValue::Kind::NewObject;
  obj->class_value = class_value;
  obj->mutable_here = true;
  PyObject* init = lookup_type_attr(class_value->py(), "__init__");
  if (init != nullptr && PyFunction_Check(init)) {
    ValuePtr init_value = ctx.wrap(init, Source::attr(class_value->source, "__init__"));
    args.insert(args.begin(), obj);
    inline_function(ctx, init_value, std::move(args), std::move(kwargs));
  } else if (!args.empty() || !kwargs.empty()) {
    unsupported("creating an instance of " + class_value->describe() + " with arguments");
  }
  return obj;
}

ValuePtr find_attribute(const ValuePtr& object, const std::string& name) {
  for (size_t i = 0; i < object->keys.size(); ++i) {
    if (name == PyUnicode_AsUTF8(object->keys[i]->py())) return object->items[i];
  }
  return nullptr;
}

bool delete_attribute(const ValuePtr& object, const std::string& name) {
  for (size_t i = 0; i < object->keys.size(); ++i) {
    if (name == PyUnicode_AsUTF8(object->keys[i]->py())) {
      object->keys.erase(object->keys.begin() + static_cast<long>(i));
      object->items.erase(object->items.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

void store_attribute(const ValuePtr& object, const std::string& name, const ValuePtr& value) {
  for (size_t i = 0; i < object->keys.size(); ++i) {
    if (name == PyUnicode_AsUTF8(object->keys[i]->py())) {
      object->items[i] = value;
      return;
    }
  }
  object->keys.push_back(TracedValue::constant(PyRef::steal(PyUnicode_FromString(name.c_str()))));
  object->items.push_back(value);
}

ValuePtr class_attribute(TraceContext& ctx, const ValuePtr& self, const ValuePtr& class_value,
                         const std::string& name) {
  PyObject* found = lookup_type_attr(class_value->py(), name);
  if (found == nullptr) return nullptr;
  SourcePtr src = Source::attr(class_value->source, name);
  if (PyObject_TypeCheck(found, &PyProperty_Type)) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(found, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) unsupported("property " + name);
    return inline_function(ctx, ctx.wrap(fget.get(), Source::attr(src, "fget")), {self}, {});
  }
  if (PyFunction_Check(found)) return bound(self, ctx.wrap(found, src));
  if (Py_TYPE(found) == &PyStaticMethod_Type) {
    PyRef fn = PyRef::steal(PyObject_GetAttrString(found, "__func__"));
    return ctx.wrap(fn.get(), src);
  }
  if (Py_TYPE(found) == &PyClassMethod_Type) {
    PyRef fn = PyRef::steal(PyObject_GetAttrString(found, "__func__"));
    return bound(class_value, ctx.wrap(fn.get(), Source::attr(src, "__func__")));
  }
  return ctx.wrap(found, src);
}

ValuePtr new_object_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name) {
  // Data descriptors (properties) on the class come first, then the instance's attributes.
  PyObject* type = object->class_value->py();
  PyObject* on_class = lookup_type_attr(type, name);
  if (on_class != nullptr && Py_TYPE(on_class) == &PyMemberDescr_Type) {
    // A slot (__slots__): set or not, as the trace knows; unset, an AttributeError.
    if (ValuePtr v = find_attribute(object, name)) return v;
    if (lookup_type_attr(type, "__getattr__") != nullptr) unsupported("unset slot " + name);
    attribute_missing(reinterpret_cast<PyTypeObject*>(type)->tp_name, name);
  }
  if (on_class == nullptr || !PyObject_TypeCheck(on_class, &PyProperty_Type)) {
    if (ValuePtr v = find_attribute(object, name)) return v;
  }
  if (name == "__class__") return object->class_value;
  ValuePtr v = class_attribute(ctx, object, object->class_value, name);
  if (!v) unsupported("'" + object->describe() + "' has no attribute '" + name + "'");
  return v;
}

void set_new_object_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                              const ValuePtr& value) {
  PyObject* type = object->class_value->py();
  PyObject* setattr = lookup_type_attr(type, "__setattr__");
  PyObject* generic_setattr =
      lookup_type_attr(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__setattr__");
  if (setattr != generic_setattr) unsupported("assignment through a class's own __setattr__");
  PyObject* on_class = lookup_type_attr(type, name);
  if (on_class != nullptr && PyObject_TypeCheck(on_class, &PyProperty_Type)) {
    PyRef fset = PyRef::steal(PyObject_GetAttrString(on_class, "fset"));
    if (!fset || !PyFunction_Check(fset.get())) {
      PyErr_Clear();
      unsupported("assignment to the property " + name);
    }
    SourcePtr src = Source::attr(Source::attr(object->class_value->source, name), "fset");
    inline_function(ctx, ctx.wrap(fset.get(), src), {object, value}, {});
    return;
  }
  if (on_class != nullptr && Py_TYPE(on_class) == &PyMemberDescr_Type) {
    store_attribute(object, name, value);  // a slot
    return;
  }
  if (on_class != nullptr && Py_TYPE(on_class)->tp_descr_set != nullptr) {
    unsupported("assignment to the data descriptor " + name);
  }
  // Without a __dict__ (every class of the MRO has __slots__), only slots can be set: Python
  // raises AttributeError, which eager execution then does.
  if (!has_instance_dict(type)) {
    unsupported("AttributeError: '" + std::string(reinterpret_cast<PyTypeObject*>(type)->tp_name) +
                "' object has no attribute '" + name + "'");
  }
  store_attribute(object, name, value);
}

ValuePtr call_dunder(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                     std::vector<ValuePtr> args) {
  PyObject* type = nullptr;
  SourcePtr type_source;
  if (object->is(TracedValue::Kind::NewObject)) {
    type = object->class_value->py();
    type_source = object->class_value->source;
  } else if (object->is(TracedValue::Kind::Object) && object->source) {
    type = reinterpret_cast<PyObject*>(Py_TYPE(object->py()));
    type_source = Source::attr(object->source, "__class__");
  } else {
    return nullptr;
  }
  PyObject* found = lookup_type_attr(type, name);
  if (found == nullptr || !PyFunction_Check(found)) return nullptr;
  ValuePtr fn = ctx.wrap(found, Source::attr(type_source, name));
  args.insert(args.begin(), object);
  return inline_function(ctx, fn, std::move(args), {});
}

ValuePtr make_named_tuple(TraceContext& ctx, const ValuePtr& class_value,
                          const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  PyObject* type = class_value->py();
  PyRef fields = PyRef::steal(PyObject_GetAttrString(type, "_fields"));
  PyRef defaults = PyRef::steal(PyObject_GetAttrString(type, "_field_defaults"));
  if (!fields || !PyTuple_Check(fields.get())) unsupported_from_python_error("named tuple fields");
  Py_ssize_t n = PyTuple_GET_SIZE(fields.get());
  std::vector<ValuePtr> items(static_cast<size_t>(n));
  if (static_cast<Py_ssize_t>(args.size()) > n) unsupported("too many values for a named tuple");
  for (size_t i = 0; i < args.size(); ++i) items[i] = args[i];
  for (const auto& [name, value] : kwargs) {
    bool found = false;
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (name == PyUnicode_AsUTF8(PyTuple_GET_ITEM(fields.get(), i))) {
        items[static_cast<size_t>(i)] = value;
        found = true;
      }
    }
    if (!found) unsupported("unknown named tuple field " + name);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (items[static_cast<size_t>(i)]) continue;
    PyObject* field = PyTuple_GET_ITEM(fields.get(), i);
    PyObject* d = defaults ? PyDict_GetItem(defaults.get(), field) : nullptr;  // borrowed
    if (d == nullptr) unsupported("missing named tuple field");
    items[static_cast<size_t>(i)] = TracedValue::constant(PyRef::borrow(d));
  }
  PyErr_Clear();
  (void)ctx;
  ValuePtr t = TracedValue::tuple(std::move(items));
  t->class_value = class_value;
  return t;
}

ValuePtr named_tuple_field(const ValuePtr& tuple, const std::string& name) {
  if (!tuple->class_value) return nullptr;
  PyRef fields = PyRef::steal(PyObject_GetAttrString(tuple->class_value->py(), "_fields"));
  if (!fields || !PyTuple_Check(fields.get())) {
    PyErr_Clear();
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i) {
    if (name == PyUnicode_AsUTF8(PyTuple_GET_ITEM(fields.get(), i))) {
      return tuple->items.at(static_cast<size_t>(i));
    }
  }
  return nullptr;
}

}  // namespace dynvm::vm
