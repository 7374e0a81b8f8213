// Attribute reads in the VM: tensors, nn.Modules (parameters, buffers, submodules read
// from their dicts), plain objects, classes, Python modules, containers and super().
#include <string>
#include <utility>

#include "inline_frame.h"
#include "known_objects.h"
#include "python_values.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

namespace {

const KnownObjects& known() { return *KnownObjects::get(); }

ValuePtr bound_method(ValuePtr self, ValuePtr function) {
  auto m = std::make_shared<TracedValue>();
  m->kind = TracedValue::Kind::BoundMethod;
  m->self_value = std::move(self);
  m->function = std::move(function);
  return m;
}

// The attribute `name` found in the MRO of `type`, with the index of the class that
// defines it; borrowed, nullptr when absent.
PyObject* lookup_in_mro(PyTypeObject* type, const std::string& name, Py_ssize_t start,
                        Py_ssize_t* where) {
  PyObject* mro = type->tp_mro;  // borrowed tuple
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  for (Py_ssize_t i = start; mro != nullptr && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* base = PyTuple_GET_ITEM(mro, i);
    PyRef dict = type_dict(reinterpret_cast<PyTypeObject*>(base));
    if (!dict) continue;
    PyObject* found = PyDict_GetItemWithError(dict.get(), key.get());
    if (found != nullptr) {
      if (where) *where = i;
      return found;
    }
    PyErr_Clear();
  }
  return nullptr;
}

ValuePtr tensor_attribute(TraceContext& ctx, const ValuePtr& tensor, const std::string& name) {
  if (name == "grad" && tensor->source) {
    // The gradient autograd left on a tensor read from a source (a parameter): a graph
    // input of its own, or None, guarded as it is now. Nothing inside a graph changes it
    // (backward is a graph break; a write to it is a side effect load_attribute sees).
    if (PyObject* real = ctx.bridge->real_input(tensor)) {
      PyRef grad = PyRef::steal(PyObject_GetAttrString(real, "grad"));
      if (!grad) unsupported_from_python_error("reading Tensor.grad");
      return ctx.wrap(grad.get(), Source::attr(tensor->source, "grad"));
    }
  }
  if (name == "grad" || name == "_base" || name == "grad_fn" || name == "_version" ||
      name == "data") {
    unsupported("reading Tensor." + name + " while tracing");
  }
  auto* tensor_type = reinterpret_cast<PyTypeObject*>(known().tensor_type.get());
  PyObject* descr = lookup_in_mro(tensor_type, name, 0, nullptr);
  if (descr == nullptr) unsupported("unknown tensor attribute " + name);
  if (PyFunction_Check(descr) || Py_TYPE(descr) == &PyMethodDescr_Type ||
      Py_TYPE(descr) == &PyWrapperDescr_Type || PyCFunction_Check(descr)) {
    return bound_method(tensor, TracedValue::object(PyRef::borrow(descr)));
  }
  if (name == "__class__") {
    return TracedValue::object(tensor->tensor_type ? tensor->tensor_type : known().tensor_type);
  }
  // A property or getset (shape, dtype, T, ...): evaluated on the fake tensor.
  PyObject* getattr_fn = PyDict_GetItemString(known().builtins.get(), "getattr");  // borrowed
  ValuePtr name_value = TracedValue::constant(PyRef::steal(PyUnicode_FromString(name.c_str())));
  return ctx.bridge->call(getattr_fn, {tensor, name_value}, {});
}

ValuePtr module_attribute(TraceContext& ctx, const ValuePtr& module_value,
                          const std::string& name) {
  PyObject* module = module_value->py();
  const SourcePtr& src = module_value->source;
  if (!src) unsupported("attribute of an nn.Module with no source");
  ctx.check_attribute_read(module, name);
  PyRef dict = PyRef::steal(PyObject_GenericGetDict(module, nullptr));
  if (!dict) unsupported_from_python_error("module __dict__");
  Py_ssize_t where = 0;
  PyObject* class_attr = lookup_in_mro(Py_TYPE(module), name, 0, &where);
  // Data descriptors on the class win over the instance dict.
  if (class_attr != nullptr && PyObject_TypeCheck(class_attr, &PyProperty_Type)) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(class_attr, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) unsupported("property " + name);
    ValuePtr fget_value = ctx.wrap(
        fget.get(), Source::attr(Source::attr(Source::attr(src, "__class__"), name), "fget"));
    return inline_function(ctx, fget_value, {module_value}, {});
  }
  PyObject* found = PyDict_GetItemString(dict.get(), name.c_str());  // borrowed
  if (found != nullptr) return ctx.wrap(found, Source::attr(src, name));
  struct Member {
    const char* dict_name;
    Source::Kind kind;
  };
  for (Member m : {Member{"_parameters", Source::Kind::ModuleParam},
                   Member{"_buffers", Source::Kind::ModuleBuffer},
                   Member{"_modules", Source::Kind::ModuleChild}}) {
    PyObject* members = PyDict_GetItemString(dict.get(), m.dict_name);  // borrowed
    if (members == nullptr) continue;
    PyObject* member = PyDict_GetItemString(members, name.c_str());  // borrowed
    if (member != nullptr) {
      if (member == Py_None) {
        // An optional parameter/buffer set to None (bias=False).
        return ctx.wrap(member, Source::module_member(m.kind, src, name));
      }
      return ctx.wrap(member, Source::module_member(m.kind, src, name));
    }
  }
  if (class_attr != nullptr) {
    SourcePtr class_src = Source::attr(Source::attr(src, "__class__"), name);
    static const char* kStructureMethods[] = {"parameters",    "named_parameters", "buffers",
                                              "named_buffers", "children",         "named_children",
                                              "modules",       "named_modules"};
    if (PyFunction_Check(class_attr) && module_name_of(class_attr) == "torch.nn.modules.module") {
      for (const char* m : kStructureMethods) {
        if (name == m) {
          // nn.Module's own generators over the module tree: evaluated by the VM itself.
          return bound_method(module_value, TracedValue::constant(PyRef::steal(
                                                PyUnicode_FromString(("module:" + name).c_str()))));
        }
      }
    }
    if (PyFunction_Check(class_attr)) {
      return bound_method(module_value, ctx.wrap(class_attr, class_src));
    }
    if (Py_TYPE(class_attr) == &PyStaticMethod_Type) {
      PyObject* fn = PyObject_GetAttrString(class_attr, "__func__");
      PyRef fn_ref = PyRef::steal(fn);
      return ctx.wrap(fn, class_src);
    }
    if (name == "__class__") {
      return ctx.wrap(reinterpret_cast<PyObject*>(Py_TYPE(module)), Source::attr(src, name));
    }
    if (Py_TYPE(class_attr) == &PyClassMethod_Type) {
      PyRef fn = PyRef::steal(PyObject_GetAttrString(class_attr, "__func__"));
      if (!fn || !PyFunction_Check(fn.get())) unsupported("classmethod " + name);
      ValuePtr cls =
          ctx.wrap(reinterpret_cast<PyObject*>(Py_TYPE(module)), Source::attr(src, "__class__"));
      return bound_method(cls, ctx.wrap(fn.get(), Source::attr(class_src, "__func__")));
    }
    if (Py_TYPE(class_attr)->tp_descr_get != nullptr) {
      // Another descriptor (a slot, a C getset, a cached property): the class attribute is
      // not the value. Read as Python reads it; a method made per read cannot be guarded.
      PyRef value = PyRef::steal(PyObject_GetAttrString(module, name.c_str()));
      if (!value) unsupported_from_python_error("attribute " + name);
      if (PyMethod_Check(value.get())) unsupported("the method made by descriptor " + name);
      return ctx.wrap(value.get(), Source::attr(src, name));
    }
    return ctx.wrap(class_attr, Source::attr(src, name));
  }
  unsupported("'" + std::string(Py_TYPE(module)->tp_name) + "' object has no attribute '" + name +
              "'");
}

// Whether the class or a base defines __getattr__ (the fallback of a failed lookup).
bool has_getattr_fallback(PyTypeObject* type) {
  Py_ssize_t where = 0;
  return lookup_in_mro(type, "__getattr__", 0, &where) != nullptr;
}

ValuePtr object_attribute(TraceContext& ctx, const ValuePtr& obj_value, const std::string& name) {
  PyObject* obj = obj_value->py();
  const SourcePtr& src = obj_value->source;
  if (is_module(obj)) return module_attribute(ctx, obj_value, name);
  PyTypeObject* obj_type = Py_TYPE(obj);
  if (src && !PyModule_Check(obj) && !PyType_Check(obj) && !has_generic_getattribute(obj_type)) {
    // The class's own __getattribute__ (transformers' configs remap names with one) is traced
    // like any method; the object.__getattribute__ it ends in is generic_object_attribute.
    Py_ssize_t where = 0;
    PyObject* getattribute = lookup_in_mro(obj_type, "__getattribute__", 0, &where);
    if (getattribute != nullptr && PyFunction_Check(getattribute)) {
      ValuePtr fn =
          ctx.wrap(getattribute, Source::attr(Source::attr(src, "__class__"), "__getattribute__"));
      PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
      return inline_function(ctx, fn, {obj_value, TracedValue::constant(key)}, {});
    }
  }
  return generic_object_attribute(ctx, obj_value, name);
}

}  // namespace

ValuePtr generic_object_attribute(TraceContext& ctx, const ValuePtr& obj_value,
                                  const std::string& name) {
  PyObject* obj = obj_value->py();
  const SourcePtr& src = obj_value->source;
  if (is_module(obj)) return module_attribute(ctx, obj_value, name);
  ctx.check_attribute_read(obj, name);
  if (PyModule_Check(obj) || PyType_Check(obj)) {
    if (PyType_Check(obj)) {
      Py_ssize_t where = 0;
      PyObject* raw = lookup_in_mro(reinterpret_cast<PyTypeObject*>(obj), name, 0, &where);
      if (raw != nullptr && Py_TYPE(raw) == &PyClassMethod_Type) {
        PyRef fn = PyRef::steal(PyObject_GetAttrString(raw, "__func__"));
        if (!src) unsupported("classmethod of a class with no source");
        ValuePtr f = ctx.wrap(fn.get(), Source::attr(Source::attr(src, name), "__func__"));
        return bound_method(obj_value, f);
      }
    }
    PyRef value = PyRef::steal(PyObject_GetAttrString(obj, name.c_str()));
    if (!value) unsupported_from_python_error("attribute " + name);
    if (!src) return TracedValue::object(value);
    return ctx.wrap(value.get(), Source::attr(src, name));
  }
  PyTypeObject* type = Py_TYPE(obj);
  Py_ssize_t where = 0;
  PyObject* class_attr = lookup_in_mro(type, name, 0, &where);
  if (class_attr != nullptr && PyObject_TypeCheck(class_attr, &PyProperty_Type)) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(class_attr, "fget"));
    if (!fget || !PyFunction_Check(fget.get()) || !src) unsupported("property " + name);
    ValuePtr fget_value = ctx.wrap(
        fget.get(), Source::attr(Source::attr(Source::attr(src, "__class__"), name), "fget"));
    return inline_function(ctx, fget_value, {obj_value}, {});
  }
  // Plain instance attribute.
  PyObject** dictptr = _PyObject_GetDictPtr(obj);
  if (dictptr != nullptr && *dictptr != nullptr) {
    PyObject* found = PyDict_GetItemString(*dictptr, name.c_str());  // borrowed
    if (found != nullptr) {
      if (!src) return TracedValue::object(PyRef::borrow(found));
      return ctx.wrap(found, Source::attr(src, name));
    }
    if (class_attr == nullptr && src && (type->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
        !has_getattr_fallback(type)) {
      // Missing: neither the instance nor its class has it, as long as the class stays the
      // same and the instance's keys do.
      ctx.guard(TraceContext::GuardKind::TypeMatch, src, obj);
      ctx.guard(TraceContext::GuardKind::DictKeys, Source::attr(src, "__dict__"), *dictptr);
      attribute_missing(type->tp_name, name);
    }
  } else if (type->tp_flags & Py_TPFLAGS_MANAGED_DICT) {
    PyRef value = PyRef::steal(PyObject_GenericGetAttr(obj, PyUnicode_FromString(name.c_str())));
    if (value && (class_attr == nullptr || !PyFunction_Check(class_attr))) {
      if (!src) return TracedValue::object(value);
      return ctx.wrap(value.get(), Source::attr(src, name));
    }
    PyErr_Clear();
  }
  if (class_attr != nullptr) {
    if (PyFunction_Check(class_attr)) {
      if (!src) unsupported("method of an object with no source");
      return bound_method(obj_value,
                          ctx.wrap(class_attr, Source::attr(Source::attr(src, "__class__"), name)));
    }
    if (Py_TYPE(class_attr) == &PyStaticMethod_Type) {
      PyRef fn = PyRef::steal(PyObject_GetAttrString(class_attr, "__func__"));
      if (!src) unsupported("static method of an object with no source");
      return ctx.wrap(fn.get(), Source::attr(Source::attr(src, "__class__"), name));
    }
  }
  // Builtin objects (dtypes, devices, functions): read concretely.
  PyRef value = PyRef::steal(PyObject_GetAttrString(obj, name.c_str()));
  if (!value) unsupported_from_python_error("attribute " + name);
  if (!src) return TracedValue::constant(value);
  return ctx.wrap(value.get(), Source::attr(src, name));
}

namespace {

ValuePtr super_attribute(TraceContext& ctx, const ValuePtr& sup, const std::string& name) {
  PyObject* cls = sup->items[0]->py();
  const ValuePtr& self = sup->items[1];
  if (self->is(TracedValue::Kind::NewObject) && cls != nullptr && PyType_Check(cls)) {
    PyObject* mro = reinterpret_cast<PyTypeObject*>(self->class_value->py())->tp_mro;
    Py_ssize_t start = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
      if (PyTuple_GET_ITEM(mro, i) == cls) start = i + 1;
    }
    if (start < 0) unsupported("super(): class not in the MRO");
    Py_ssize_t where = 0;
    PyObject* found = lookup_in_mro(reinterpret_cast<PyTypeObject*>(self->class_value->py()), name,
                                    start, &where);
    // A Python method, or one of a builtin base (object.__setattr__, OrderedDict.__setitem__)
    // that call_builtin_base_method evaluates on the instance.
    if (found == nullptr || !(PyFunction_Check(found) || Py_TYPE(found) == &PyMethodDescr_Type ||
                              Py_TYPE(found) == &PyWrapperDescr_Type)) {
      unsupported("super()." + name);
    }
    SourcePtr src =
        Source::attr(Source::item(Source::attr(self->class_value->source, "__mro__"), where), name);
    return bound_method(self, ctx.wrap(found, src));
  }
  PyObject* self_obj = self->py();
  if (cls == nullptr || !PyType_Check(cls) || self_obj == nullptr || !self->source) {
    unsupported("super() over a " + self->describe());
  }
  PyTypeObject* type = Py_TYPE(self_obj);
  PyObject* mro = type->tp_mro;
  Py_ssize_t start = -1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    if (PyTuple_GET_ITEM(mro, i) == cls) start = i + 1;
  }
  if (start < 0) unsupported("super(): class not in the MRO");
  Py_ssize_t where = 0;
  PyObject* found = lookup_in_mro(type, name, start, &where);
  if (found == nullptr) unsupported("super() has no attribute " + name);
  SourcePtr src = Source::attr(
      Source::item(Source::attr(Source::attr(self->source, "__class__"), "__mro__"), where), name);
  if (PyFunction_Check(found) || Py_TYPE(found) == &PyMethodDescr_Type ||
      Py_TYPE(found) == &PyWrapperDescr_Type) {
    return bound_method(self, ctx.wrap(found, src));
  }
  if (Py_TYPE(found)->tp_descr_get != nullptr) {
    unsupported("super()." + name + ", a " + Py_TYPE(found)->tp_name);  // property, classmethod
  }
  return ctx.wrap(found, src);
}

}  // namespace

void store_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                     const ValuePtr& value) {
  if (object->is(TracedValue::Kind::NewObject) && object->mutable_here) {
    set_attribute(ctx, object, name, value);
    return;
  }
  if (ctx.record_attribute_write(object, name, value)) return;
  if (object->is_tensor() && !object->source && name == "requires_grad" && value->is_constant() &&
      value->py() == Py_True && known().tensor_base_type) {
    // `t.requires_grad = True` on a tensor the trace made (wav2vec2's feature encoder marks
    // a view of its input for gradient checkpointing): what `t.requires_grad_()` records,
    // an autograd leaf from here on; torch's own check (only leaves) runs on the fake.
    PyRef method =
        PyRef::steal(PyObject_GetAttrString(known().tensor_base_type.get(), "requires_grad_"));
    if (!method) unsupported_from_python_error("reading Tensor.requires_grad_");
    ValuePtr marked = ctx.bridge->call(method.get(), {object, value}, {});
    object->graph_value = marked->graph_value;
    return;
  }
  unsupported("assignment to attribute '" + name + "' of a " + object->describe());
}

void delete_attribute_of(TraceContext& ctx, const ValuePtr& object, const std::string& name) {
  if (object->is(TracedValue::Kind::NewObject) && object->mutable_here) {
    delete_attribute(ctx, object, name);
    return;
  }
  unsupported("deleting attribute '" + name + "' of a " + object->describe());
}

ValuePtr load_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name) {
  if (object->is(TracedValue::Kind::Object) && object->py() != nullptr &&
      PyModule_Check(object->py())) {
    ctx.note_global_read(PyModule_GetDict(object->py()), name);  // a global of that module
  }
  if (ValuePtr written = ctx.attribute_written(object, name)) return written;
  switch (object->kind) {
    case TracedValue::Kind::Tensor:
      return tensor_attribute(ctx, object, name);
    case TracedValue::Kind::Object:
      return object_attribute(ctx, object, name);
    case TracedValue::Kind::Super:
      return super_attribute(ctx, object, name);
    case TracedValue::Kind::NewObject:
      return new_object_attribute(ctx, object, name);
    case TracedValue::Kind::Slice:
      if (name == "start") return object->items[0];
      if (name == "stop") return object->items[1];
      if (name == "step") return object->items[2];
      unsupported("attribute '" + name + "' of a slice");
    case TracedValue::Kind::Constant:
    case TracedValue::Kind::Range: {
      if (object->mutable_here) {
        // A set the trace made: its methods mutate it in place (call_container_method).
        return bound_method(
            object, TracedValue::constant(PyRef::steal(PyUnicode_FromString(name.c_str()))));
      }
      PyRef value = PyRef::steal(PyObject_GetAttrString(object->py(), name.c_str()));
      if (!value) unsupported_from_python_error("attribute " + name);
      if (PyCFunction_Check(value.get())) {
        // A method of the caller's own set (add, update) is read from that set again where
        // a break rebuilds the frame, so that eager code calls it on the caller's object.
        if (object->source && PySet_Check(object->py())) {
          return TracedValue::object(value, Source::attr(object->source, name));
        }
        return TracedValue::object(value);
      }
      return TracedValue::constant(value);
    }
    case TracedValue::Kind::Tuple:
    case TracedValue::Kind::List:
    case TracedValue::Kind::Dict: {
      if (ValuePtr field = named_tuple_field(object, name)) return field;
      if (object->class_value && object->class_value->source) {
        // Class attributes of a named tuple (_fields, _field_defaults): read from its class.
        PyRef value = PyRef::steal(PyObject_GetAttrString(object->class_value->py(), name.c_str()));
        if (value && !PyCallable_Check(value.get())) {
          return ctx.wrap(value.get(), Source::attr(object->class_value->source, name));
        }
        PyErr_Clear();
      }
      if (object->is(TracedValue::Kind::Tuple) && object->obj && !object->is_size) {
        // A named tuple (torch.return_types.max, a user namedtuple): fields by name.
        PyRef value = PyRef::steal(PyObject_GetAttrString(object->obj.get(), name.c_str()));
        if (value && !PyCallable_Check(value.get())) {
          for (const ValuePtr& item : object->items) {
            if (item->obj.get() == value.get()) return item;
          }
        }
        PyErr_Clear();
      }
      return bound_method(object,
                          TracedValue::constant(PyRef::steal(PyUnicode_FromString(name.c_str()))));
    }
    default:
      unsupported("attribute '" + name + "' of a " + object->describe());
  }
}

}  // namespace dynvm::vm
