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

const KnownObjects& known() { return *KnownObjects::get(); }

PyObject* lookup_type_attr(PyObject* type, const std::string& name) {  // borrowed or null
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* found = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), key.get());
  return found;
}

// Whether `found` (borrowed, may be null) is the slot wrapper of `object`, `dict` or
// `OrderedDict` for the attribute protocol (__getattribute__, __setattr__, __delattr__): all
// three use the generic lookup of `object`.
bool is_generic_attribute_slot(PyObject* found) {
  if (found == nullptr || Py_TYPE(found) != &PyWrapperDescr_Type) return false;
  auto* descr = reinterpret_cast<PyDescrObject*>(found);
  static const char* const kNames[] = {"__getattribute__", "__setattr__", "__delattr__"};
  bool attribute_slot = false;
  for (const char* name : kNames) {
    attribute_slot = attribute_slot || PyUnicode_CompareWithASCIIString(descr->d_name, name) == 0;
  }
  if (!attribute_slot) return false;
  PyTypeObject* owner = descr->d_type;
  return owner == &PyBaseObject_Type || owner == &PyDict_Type ||
         reinterpret_cast<PyObject*>(owner) == KnownObjects::get()->ordered_dict_type.get();
}

ValuePtr bound(ValuePtr self, ValuePtr function) {
  auto m = std::make_shared<TracedValue>();
  m->kind = TracedValue::Kind::BoundMethod;
  m->self_value = std::move(self);
  m->function = std::move(function);
  return m;
}

ValuePtr none_value() { return TracedValue::constant(PyRef::borrow(Py_None)); }
ValuePtr str_value(const std::string& s) {
  return TracedValue::constant(PyRef::steal(PyUnicode_FromString(s.c_str())));
}

bool is_builtin_method_descriptor(PyObject* o) {
  return Py_TYPE(o) == &PyMethodDescr_Type || Py_TYPE(o) == &PyWrapperDescr_Type;
}

}  // namespace

bool declares_slots(PyObject* type) {
  PyObject* mro = reinterpret_cast<PyTypeObject*>(type)->tp_mro;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if ((base->tp_flags & Py_TPFLAGS_HEAPTYPE) && base->tp_dict != nullptr &&
        PyDict_GetItemString(base->tp_dict, "__slots__") != nullptr) {
      return true;
    }
  }
  return false;
}

namespace {

int find_key(const ValuePtr& dict, const std::string& name) {
  for (size_t i = 0; i < dict->keys.size(); ++i) {
    PyObject* k = dict->keys[i]->py();
    if (k != nullptr && PyUnicode_Check(k) && name == PyUnicode_AsUTF8(k)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

void store_instance_attribute(const ValuePtr& object, const std::string& name,
                              const ValuePtr& value) {
  const ValuePtr& d = object->instance_dict;
  int i = find_key(d, name);
  if (i >= 0) {
    d->items[static_cast<size_t>(i)] = value;
    return;
  }
  d->keys.push_back(str_value(name));
  d->items.push_back(value);
}

bool remove_instance_attribute(const ValuePtr& object, const std::string& name) {
  const ValuePtr& d = object->instance_dict;
  int i = find_key(d, name);
  if (i < 0) return false;
  d->keys.erase(d->keys.begin() + i);
  d->items.erase(d->items.begin() + i);
  return true;
}

// The property `descr` of the class (borrowed), its accessor `which` ("fget", "fset",
// "fdel") as a traced function, or null when it has none.
ValuePtr property_accessor(TraceContext& ctx, const ValuePtr& object, PyObject* descr,
                           const std::string& name, const char* which) {
  PyRef fn = PyRef::steal(PyObject_GetAttrString(descr, which));
  if (!fn) unsupported_from_python_error("property " + name);
  if (fn.get() == Py_None) return nullptr;
  if (!PyFunction_Check(fn.get())) unsupported("property " + name + " with a builtin " + which);
  return ctx.wrap(fn.get(), Source::attr(Source::attr(object->class_value->source, name), which));
}

ValuePtr class_attribute(TraceContext& ctx, const ValuePtr& self, const ValuePtr& class_value,
                         const std::string& name) {
  PyObject* found = lookup_type_attr(class_value->py(), name);
  if (found == nullptr) return nullptr;
  SourcePtr src = Source::attr(class_value->source, name);
  if (PyObject_TypeCheck(found, &PyProperty_Type)) {
    ValuePtr fget = property_accessor(ctx, self, found, name, "fget");
    if (!fget) unsupported("reading the write-only property " + name);
    return inline_function(ctx, fget, {self}, {});
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
  // A method of a builtin base (dict.keys, OrderedDict.__setitem__): bound to the instance,
  // called through call_builtin_base_method.
  if (is_builtin_method_descriptor(found)) return bound(self, ctx.wrap(found, src));
  if (Py_TYPE(found)->tp_descr_get != nullptr) {
    unsupported("the class attribute " + name + ", a " + Py_TYPE(found)->tp_name +
                " (a descriptor)");
  }
  return ctx.wrap(found, src);
}

// object.__getattribute__(obj, name) for a NewObject.
ValuePtr generic_new_object_attribute(TraceContext& ctx, const ValuePtr& object,
                                      const std::string& name) {
  auto* type = reinterpret_cast<PyTypeObject*>(object->class_value->py());
  if (name == "__dict__") {
    if (!has_instance_dict(object->class_value->py()) ||
        declares_slots(object->class_value->py())) {
      unsupported("__dict__ of a " + object->describe() + " with __slots__");
    }
    return object->instance_dict;
  }
  // Data descriptors (properties) on the class come first, then the instance's attributes.
  PyObject* on_class = lookup_type_attr(object->class_value->py(), name);
  bool data_descriptor = on_class != nullptr && Py_TYPE(on_class)->tp_descr_set != nullptr &&
                         Py_TYPE(on_class) != &PyMemberDescr_Type;
  if (!data_descriptor) {
    if (ValuePtr v = find_attribute(object, name)) return v;
  }
  if (on_class != nullptr && Py_TYPE(on_class) == &PyMemberDescr_Type) {
    // An unset slot (__slots__): an AttributeError, which __getattr__ would then handle.
    if (lookup_type_attr(object->class_value->py(), "__getattr__") != nullptr) {
      unsupported("unset slot " + name);
    }
    attribute_missing(type->tp_name, name);
  }
  if (name == "__class__") return object->class_value;
  ValuePtr v = class_attribute(ctx, object, object->class_value, name);
  // The trace holds every attribute of an object it made: a missing one is an AttributeError.
  if (!v) attribute_missing(type->tp_name, name);
  return v;
}

// object.__setattr__(obj, name, value) for a NewObject.
void generic_set_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                           const ValuePtr& value) {
  PyObject* descr = lookup_type_attr(object->class_value->py(), name);
  bool slot = descr != nullptr && Py_TYPE(descr) == &PyMemberDescr_Type;
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr && !slot) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) {
      ValuePtr fset = property_accessor(ctx, object, descr, name, "fset");
      if (!fset) unsupported("AttributeError: property " + name + " has no setter");
      inline_function(ctx, fset, {object, value}, {});
      return;
    }
    unsupported("assignment to " + name + ", a " + std::string(Py_TYPE(descr)->tp_name) +
                " of the class");
  }
  if (!slot && !has_instance_dict(object->class_value->py())) {
    unsupported("AttributeError: '" + object->describe() + "' has no attribute " + name);
  }
  ctx.check_generator_mutation(object, "setting the attribute '" + name + "'");
  store_instance_attribute(object, name, value);
}

// object.__delattr__(obj, name) for a NewObject.
void generic_delete_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name) {
  PyObject* descr = lookup_type_attr(object->class_value->py(), name);
  bool slot = descr != nullptr && Py_TYPE(descr) == &PyMemberDescr_Type;
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr && !slot) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) {
      ValuePtr fdel = property_accessor(ctx, object, descr, name, "fdel");
      if (!fdel) unsupported("AttributeError: property " + name + " has no deleter");
      inline_function(ctx, fdel, {object}, {});
      return;
    }
    unsupported("deleting " + name + ", a " + std::string(Py_TYPE(descr)->tp_name) +
                " of the class");
  }
  ctx.check_generator_mutation(object, "deleting the attribute '" + name + "'");
  if (!remove_instance_attribute(object, name)) unsupported("AttributeError: " + name);
}

std::string constant_name(const ValuePtr& v, const char* what) {
  if (!v->is_constant() || !PyUnicode_Check(v->py())) {
    unsupported(std::string(what) + " with a name that is not a constant string");
  }
  return PyUnicode_AsUTF8(v->py());
}

// A method the VM evaluates itself on a traced dict (keys, update, ...), called.
ValuePtr call_dict_method(TraceContext& ctx, const ValuePtr& dict, const std::string& method,
                          std::vector<ValuePtr> args, KwArgs kwargs) {
  return call_value(ctx, load_attribute(ctx, dict, method), std::move(args), std::move(kwargs));
}

// dict(*args, **kwargs) as a traced dict.
ValuePtr make_plain_dict(TraceContext& ctx, std::vector<ValuePtr> args, KwArgs kwargs) {
  ValuePtr dict_type =
      TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(&PyDict_Type)));
  return call_value(ctx, dict_type, std::move(args), std::move(kwargs));
}

// A builtin base method called on an object that existed before the call (kind Object):
// only the writes that transformers' ModelOutput makes while it is built, object.__setattr__
// and dict.__setitem__ (OrderedDict's), recorded as side effects that are replayed on it.
ValuePtr call_base_method_on_live_object(TraceContext& ctx, PyObject* descriptor,
                                         const ValuePtr& self, const std::vector<ValuePtr>& args,
                                         const KwArgs& kwargs) {
  auto* d = reinterpret_cast<PyDescrObject*>(descriptor);
  PyTypeObject* owner = d->d_type;
  PyTypeObject* self_type = Py_TYPE(self->py());
  if (!PyType_IsSubtype(self_type, owner)) return nullptr;  // eager raises a TypeError
  std::string name = PyUnicode_AsUTF8(d->d_name);
  auto* ordered_dict = reinterpret_cast<PyTypeObject*>(known().ordered_dict_type.get());
  static const char* const kReaders[] = {"get",  "__getitem__", "__contains__", "__len__",
                                         "keys", "values",      "items",        "__iter__"};
  if (owner == &PyDict_Type || owner == ordered_dict) {
    for (const char* reader : kReaders) {
      if (name != reader) continue;
      // dict's own read methods (`super().get(key)` in a subclass that overrides get) read
      // its storage, guarded as a dict argument's items are.
      std::vector<ValuePtr> on_items(args);
      on_items[0] = ctx.dict_storage(self);
      return call_builtin_base_method(ctx, descriptor, on_items, kwargs);
    }
  }
  if (!kwargs.empty() || args.size() != 3) return nullptr;
  if (name == "__setattr__" && is_generic_attribute_slot(descriptor)) {
    std::string attribute = constant_name(args[1], "object.__setattr__");
    if (!ctx.record_attribute_write(self, attribute, args[2], SideEffect::Kind::GenericSetAttr)) {
      unsupported("object.__setattr__ on a " + self->describe() + " that existed before the call");
    }
    return none_value();
  }
  if (name == "__setitem__" && (owner == &PyDict_Type || owner == ordered_dict)) {
    if (owner == &PyDict_Type && PyType_IsSubtype(self_type, ordered_dict)) return nullptr;
    if (!args[1]->is_constant() || !PyUnicode_CheckExact(args[1]->py())) return nullptr;
    if (!ctx.record_base_item_write(self, PyUnicode_AsUTF8(args[1]->py()), args[2])) {
      return nullptr;
    }
    return none_value();
  }
  return nullptr;
}

}  // namespace

PyTypeObject* builtin_dict_base(PyObject* type) {
  if (!PyType_Check(type)) return nullptr;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(type)->tp_mro;
  if (mro == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (base->tp_flags & Py_TPFLAGS_HEAPTYPE) continue;
    if (base == &PyDict_Type ||
        reinterpret_cast<PyObject*>(base) == known().ordered_dict_type.get()) {
      return base;
    }
    return nullptr;  // the first builtin base is another type (object, list, ...)
  }
  return nullptr;
}

bool is_traceable_user_class(PyObject* type) {
  if (!PyType_Check(type)) return false;
  auto* t = reinterpret_cast<PyTypeObject*>(type);
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  // A metaclass may do anything when the class is called, unless it leaves that to type's
  // own __call__ (abc.ABCMeta: collections.abc bases, ABC).
  if (Py_TYPE(type) != &PyType_Type && Py_TYPE(type)->tp_call != PyType_Type.tp_call) return false;
  // object.__new__ refuses a class with abstract methods.
  if (t->tp_flags & Py_TPFLAGS_IS_ABSTRACT) return false;
  PyTypeObject* dict_base = builtin_dict_base(type);
  newfunc expected_new = dict_base != nullptr ? dict_base->tp_new : PyBaseObject_Type.tp_new;
  if (t->tp_new != expected_new) return false;
  if (PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(PyExc_BaseException))) return false;
  if (t->tp_itemsize != 0) return false;
  // Only Python-level bases: builtin containers and C types keep state we do not model. A
  // dict or OrderedDict base is modelled (NewObject::mapping_items).
  PyObject* mro = t->tp_mro;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (base == &PyBaseObject_Type || (base->tp_flags & Py_TPFLAGS_HEAPTYPE)) continue;
    if (dict_base != nullptr && (base == &PyDict_Type || base == dict_base)) continue;
    return false;
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
  obj->instance_dict = TracedValue::dict({}, {}, true);
  if (PyTypeObject* dict_base = builtin_dict_base(class_value->py())) {
    obj->mapping_items = TracedValue::dict({}, {}, true);
    if (dict_base != &PyDict_Type) {
      obj->mapping_items->class_value =
          TracedValue::object(PyRef::borrow(reinterpret_cast<PyObject*>(dict_base)));
    }
  }
  PyObject* init = lookup_type_attr(class_value->py(), "__init__");
  if (init != nullptr && PyFunction_Check(init)) {
    ValuePtr init_value = ctx.wrap(init, Source::attr(class_value->source, "__init__"));
    args.insert(args.begin(), obj);
    inline_function(ctx, init_value, std::move(args), std::move(kwargs));
  } else if (init != nullptr && is_builtin_method_descriptor(init)) {
    // object.__init__, or dict's (which fills the mapping as dict(*args, **kwargs) would).
    args.insert(args.begin(), obj);
    if (!call_builtin_base_method(ctx, init, args, kwargs)) {
      unsupported("creating an instance of " + class_value->describe());
    }
  } else if (!args.empty() || !kwargs.empty()) {
    unsupported("creating an instance of " + class_value->describe() + " with arguments");
  }
  return obj;
}

ValuePtr find_attribute(const ValuePtr& object, const std::string& name) {
  int i = find_key(object->instance_dict, name);
  return i >= 0 ? object->instance_dict->items[static_cast<size_t>(i)] : nullptr;
}

void set_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                   const ValuePtr& value) {
  PyObject* setattr = lookup_type_attr(object->class_value->py(), "__setattr__");
  if (setattr != nullptr && PyFunction_Check(setattr)) {
    ValuePtr fn = ctx.wrap(setattr, Source::attr(object->class_value->source, "__setattr__"));
    inline_function(ctx, fn, {object, str_value(name), value}, {});
    return;
  }
  if (!is_generic_attribute_slot(setattr)) {
    unsupported("assignment to an attribute of a " + object->describe() +
                " whose class has a builtin __setattr__");
  }
  generic_set_attribute(ctx, object, name, value);
}

void delete_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name) {
  PyObject* delattr = lookup_type_attr(object->class_value->py(), "__delattr__");
  if (delattr != nullptr && PyFunction_Check(delattr)) {
    ValuePtr fn = ctx.wrap(delattr, Source::attr(object->class_value->source, "__delattr__"));
    inline_function(ctx, fn, {object, str_value(name)}, {});
    return;
  }
  if (!is_generic_attribute_slot(delattr)) {
    unsupported("deleting an attribute of a " + object->describe() +
                " whose class has a builtin __delattr__");
  }
  generic_delete_attribute(ctx, object, name);
}

ValuePtr new_object_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name) {
  PyObject* getattribute = lookup_type_attr(object->class_value->py(), "__getattribute__");
  if (getattribute != nullptr && PyFunction_Check(getattribute)) {
    ValuePtr fn =
        ctx.wrap(getattribute, Source::attr(object->class_value->source, "__getattribute__"));
    return inline_function(ctx, fn, {object, str_value(name)}, {});
  }
  if (!is_generic_attribute_slot(getattribute)) {
    unsupported("reading an attribute of a " + object->describe() +
                " whose class has a builtin __getattribute__");
  }
  PyObject* getattr = lookup_type_attr(object->class_value->py(), "__getattr__");
  if (getattr == nullptr || !PyFunction_Check(getattr)) {
    return generic_new_object_attribute(ctx, object, name);
  }
  // __getattr__ runs when the lookup finds nothing: that is proved only for names the
  // instance does not hold and its class does not define.
  if (name == "__dict__" || name == "__class__" || find_attribute(object, name) ||
      lookup_type_attr(object->class_value->py(), name) != nullptr) {
    return generic_new_object_attribute(ctx, object, name);
  }
  ValuePtr fn = ctx.wrap(getattr, Source::attr(object->class_value->source, "__getattr__"));
  return inline_function(ctx, fn, {object, str_value(name)}, {});
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
  if (found == nullptr) return nullptr;
  args.insert(args.begin(), object);
  if (!PyFunction_Check(found)) return call_builtin_base_method(ctx, found, args, {});
  ValuePtr fn = ctx.wrap(found, Source::attr(type_source, name));
  return inline_function(ctx, fn, std::move(args), {});
}

ValuePtr call_builtin_base_method(TraceContext& ctx, PyObject* descriptor,
                                  const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  if (!is_builtin_method_descriptor(descriptor) || args.empty()) return nullptr;
  auto* d = reinterpret_cast<PyDescrObject*>(descriptor);
  PyTypeObject* owner = d->d_type;
  std::string name = PyUnicode_AsUTF8(d->d_name);
  auto* ordered_dict = reinterpret_cast<PyTypeObject*>(known().ordered_dict_type.get());
  bool dict_owner = owner == &PyDict_Type || owner == ordered_dict;
  if (owner != &PyBaseObject_Type && !dict_owner) return nullptr;
  const ValuePtr& self = args[0];
  PyObject* self_type = nullptr;
  ValuePtr mapping;
  if (self->is(TracedValue::Kind::NewObject)) {
    self_type = self->class_value->py();
    mapping = self->mapping_items;
  } else if (self->is(TracedValue::Kind::Dict) && dict_owner) {
    self_type = self->dict_class();
    mapping = self;
  } else if (self->is(TracedValue::Kind::Object) && self->source && !is_module(self->py()) &&
             !PyType_Check(self->py()) && !PyModule_Check(self->py())) {
    return call_base_method_on_live_object(ctx, descriptor, self, args, kwargs);
  } else {
    return nullptr;
  }
  if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(self_type), owner)) {
    unsupported("TypeError: descriptor '" + name + "' of '" + owner->tp_name + "' applied to a " +
                self->describe());
  }
  std::vector<ValuePtr> rest(args.begin() + 1, args.end());
  if (is_generic_attribute_slot(descriptor) || owner == &PyBaseObject_Type) {
    if (!kwargs.empty() || !self->is(TracedValue::Kind::NewObject)) return nullptr;
    if (name == "__setattr__" && rest.size() == 2) {
      generic_set_attribute(ctx, self, constant_name(rest[0], "object.__setattr__"), rest[1]);
      return none_value();
    }
    if (name == "__delattr__" && rest.size() == 1) {
      generic_delete_attribute(ctx, self, constant_name(rest[0], "object.__delattr__"));
      return none_value();
    }
    if (name == "__getattribute__" && rest.size() == 1) {
      return generic_new_object_attribute(ctx, self,
                                          constant_name(rest[0], "object.__getattribute__"));
    }
    if (name == "__init__" && owner == &PyBaseObject_Type) {
      if (!rest.empty()) unsupported("TypeError: object.__init__() takes exactly one argument");
      return none_value();
    }
    if (owner == &PyBaseObject_Type) return nullptr;
  }
  if (!mapping) return nullptr;
  // dict's own methods on an OrderedDict would bypass the order it keeps: never traced.
  bool ordered = PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(self_type), ordered_dict) != 0;
  static const char* const kMutators[] = {"__setitem__", "__delitem__", "__init__", "pop",
                                          "popitem",     "setdefault",  "update",   "clear"};
  if (owner == &PyDict_Type && ordered) {
    for (const char* m : kMutators) {
      if (name == m) unsupported("dict." + name + " applied to an OrderedDict");
    }
  }
  if (name == "__getitem__" && rest.size() == 1 && kwargs.empty()) {
    try {
      return subscript(ctx, mapping, rest[0]);
    } catch (KeyMissing&) {
      // dict.__getitem__ asks a subclass's __missing__ for a key it does not hold.
      if (lookup_type_attr(self_type, "__missing__") == nullptr) throw;
      if (ValuePtr v = call_dunder(ctx, self, "__missing__", {rest[0]})) return v;
      unsupported("__missing__ of a " + self->describe());
    }
  }
  if (name == "__setitem__" && rest.size() == 2 && kwargs.empty()) {
    store_subscript(ctx, mapping, rest[0], rest[1]);
    return none_value();
  }
  if (name == "__delitem__" && rest.size() == 1 && kwargs.empty()) {
    if (!contains(ctx, rest[0], mapping)) unsupported("KeyError in del");
    call_dict_method(ctx, mapping, "pop", {rest[0]}, {});
    return none_value();
  }
  if (name == "__contains__" && rest.size() == 1 && kwargs.empty()) {
    return TracedValue::constant(
        PyRef::borrow(contains(ctx, rest[0], mapping) ? Py_True : Py_False));
  }
  if (name == "__len__" && rest.empty() && kwargs.empty()) {
    return TracedValue::constant(
        PyRef::steal(PyLong_FromSize_t(static_cast<size_t>(mapping->keys.size()))));
  }
  if (name == "__iter__" && rest.empty() && kwargs.empty()) {
    return TracedValue::iterator(mapping->keys);
  }
  if (name == "__init__" || name == "update") {
    if (name == "update" && rest.size() == 1 && rest[0]->is(TracedValue::Kind::Dict) &&
        kwargs.empty()) {
      return call_dict_method(ctx, mapping, "update", rest, {});
    }
    if (rest.size() > 1) unsupported("TypeError: " + name + " expected at most 1 argument");
    if (!rest.empty() || !kwargs.empty()) {
      ValuePtr update = make_plain_dict(ctx, std::move(rest), kwargs);
      call_dict_method(ctx, mapping, "update", {update}, {});
    }
    return none_value();
  }
  if (name == "copy" && rest.empty() && kwargs.empty()) {
    if (owner != &PyDict_Type) {
      // OrderedDict.copy() is type(self)(self).
      if (self->is(TracedValue::Kind::NewObject)) unsupported("copy() of a " + self->describe());
      return call_dict_method(ctx, mapping, "copy", {}, {});
    }
    return TracedValue::dict(mapping->keys, mapping->items, true);
  }
  static const char* const kDictMethods[] = {"keys",    "values",     "items", "get",        "pop",
                                             "popitem", "setdefault", "clear", "move_to_end"};
  for (const char* m : kDictMethods) {
    if (name == m) return call_dict_method(ctx, mapping, name, rest, kwargs);
  }
  return nullptr;
}

bool new_object_mapping_items(TraceContext& ctx, const ValuePtr& value, std::vector<ValuePtr>* keys,
                              std::vector<ValuePtr>* values) {
  if (!value->is(TracedValue::Kind::NewObject)) return false;
  auto* type = reinterpret_cast<PyTypeObject*>(value->class_value->py());
  if (value->mapping_items && type->tp_iter == PyDict_Type.tp_iter) {
    // A dict subclass that keeps dict's iteration: CPython copies its items directly.
    *keys = value->mapping_items->keys;
    *values = value->mapping_items->items;
    return true;
  }
  if (lookup_type_attr(value->class_value->py(), "keys") == nullptr) return false;
  // The mapping protocol: keys(), then self[key] for each.
  ValuePtr names = call_value(ctx, load_attribute(ctx, value, "keys"), {}, {});
  for (const ValuePtr& key : iterate(ctx, names)) {
    if (!key->is_constant()) unsupported("a mapping with a key that is not a constant");
    keys->push_back(key);
    values->push_back(subscript(ctx, value, key));
  }
  return true;
}

bool new_object_truth(const ValuePtr& object, bool* known_truth) {
  *known_truth = true;
  PyObject* type = object->class_value->py();
  PyObject* as_bool = lookup_type_attr(type, "__bool__");
  PyObject* as_len = lookup_type_attr(type, "__len__");
  if (as_bool == nullptr && as_len == nullptr) return true;
  if (as_bool == nullptr && object->mapping_items && is_builtin_method_descriptor(as_len)) {
    PyTypeObject* owner = reinterpret_cast<PyDescrObject*>(as_len)->d_type;
    if (owner == &PyDict_Type ||
        reinterpret_cast<PyObject*>(owner) == known().ordered_dict_type.get()) {
      return !object->mapping_items->keys.empty();
    }
  }
  *known_truth = false;
  return false;
}

bool truth_value(TraceContext& ctx, const ValuePtr& value) {
  bool user_object =
      value->is(TracedValue::Kind::NewObject) ||
      (value->is(TracedValue::Kind::Object) && value->source && value->py() != nullptr &&
       !is_module(value->py()) && !PyType_Check(value->py()) && !PyModule_Check(value->py()));
  if (!user_object) return truthiness(value);
  PyObject* type = value->is(TracedValue::Kind::NewObject)
                       ? value->class_value->py()
                       : reinterpret_cast<PyObject*>(Py_TYPE(value->py()));
  PyObject* as_bool = lookup_type_attr(type, "__bool__");
  PyObject* as_len = lookup_type_attr(type, "__len__");
  if (as_bool != nullptr && PyFunction_Check(as_bool)) {
    ValuePtr result = call_dunder(ctx, value, "__bool__", {});
    if (!result || !result->is_constant() || !PyBool_Check(result->py())) {
      unsupported("__bool__ of a " + value->describe() + " returned no constant bool");
    }
    return result->py() == Py_True;
  }
  if (as_bool == nullptr && as_len != nullptr && PyFunction_Check(as_len)) {
    ValuePtr result = call_dunder(ctx, value, "__len__", {});
    if (!result || !result->is_constant() || !PyLong_Check(result->py())) {
      unsupported("__len__ of a " + value->describe() + " returned no constant int");
    }
    // A negative length raises ValueError in Python: left to eager execution.
    if (_PyLong_Sign(result->py()) < 0) unsupported("__len__ of a " + value->describe() + " < 0");
    return _PyLong_Sign(result->py()) > 0;
  }
  return truthiness(value);
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
