// The match statement's instructions over traced values: MATCH_SEQUENCE, MATCH_MAPPING,
// MATCH_KEYS and MATCH_CLASS, as CPython's evaluator defines them. What the trace cannot
// decide, and every case where eager raises, is a graph break, so eager raises there.
#include <string>
#include <vector>

#include "inline_frame.h"
#include "python_values.h"
#include "trace_context.h"

namespace dynvm::vm {

namespace {

PyObject* builtin(const char* name) {                   // borrowed
  PyObject* builtins = PyImport_AddModule("builtins");  // borrowed
  PyObject* found =
      builtins != nullptr ? PyDict_GetItemString(PyModule_GetDict(builtins), name) : nullptr;
  if (found == nullptr) unsupported(std::string("internal: no builtin ") + name);
  return found;
}

ValuePtr call_builtin_named(TraceContext& ctx, const char* name, std::vector<ValuePtr> args) {
  return call_value(ctx, TracedValue::object(PyRef::borrow(builtin(name))), std::move(args), {});
}

// type(subject)'s flags, the class as the trace knows it (guarded where it was read).
unsigned long type_flags(TraceContext& ctx, const ValuePtr& subject) {
  ValuePtr type = call_builtin_named(ctx, "type", {subject});
  if (type->py() == nullptr || !PyType_Check(type->py())) unsupported("match on an unknown type");
  return PyType_GetFlags(reinterpret_cast<PyTypeObject*>(type->py()));
}

// A fresh object(): a default no lookup can give back.
PyRef sentinel() {
  return PyRef::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
}

// getattr(subject, name) or nullptr where the subject has no such attribute.
ValuePtr attribute_or_null(TraceContext& ctx, const ValuePtr& subject, PyObject* name) {
  PyRef missing = sentinel();
  ValuePtr sentinel = TracedValue::object(missing);
  ValuePtr value = call_builtin_named(
      ctx, "getattr", {subject, TracedValue::constant(PyRef::borrow(name)), sentinel});
  return value->py() == missing.get() ? nullptr : value;
}

ValuePtr none() { return TracedValue::constant(PyRef::borrow(Py_None)); }

}  // namespace

bool matches_sequence(TraceContext& ctx, const ValuePtr& subject) {
  return (type_flags(ctx, subject) & Py_TPFLAGS_SEQUENCE) != 0;
}

bool matches_mapping(TraceContext& ctx, const ValuePtr& subject) {
  return (type_flags(ctx, subject) & Py_TPFLAGS_MAPPING) != 0;
}

ValuePtr match_keys(TraceContext& ctx, const ValuePtr& subject, const ValuePtr& keys) {
  PyRef key_tuple = concrete_object(keys);
  if (!key_tuple || !PyTuple_Check(key_tuple.get())) unsupported("MATCH_KEYS: keys not constant");
  Py_ssize_t n = PyTuple_GET_SIZE(key_tuple.get());
  if (n == 0) return TracedValue::tuple({});
  // Eager raises ValueError on a key given twice: the break lets it.
  PyRef distinct = PyRef::steal(PySet_New(key_tuple.get()));
  if (!distinct || PySet_GET_SIZE(distinct.get()) != n) {
    PyErr_Clear();
    unsupported("a mapping pattern with a key given twice or unhashable");
  }
  ValuePtr get = load_attribute(ctx, subject, "get");
  PyRef missing = sentinel();
  std::vector<ValuePtr> values;
  for (Py_ssize_t i = 0; i < n; ++i) {
    ValuePtr key = TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(key_tuple.get(), i)));
    ValuePtr value = call_value(ctx, get, {key, TracedValue::object(missing)}, {});
    if (value->py() == missing.get()) return none();
    values.push_back(value);
  }
  return TracedValue::tuple(std::move(values));
}

ValuePtr match_class(TraceContext& ctx, const ValuePtr& subject, const ValuePtr& cls,
                     int positional, const ValuePtr& names) {
  PyObject* type = cls->py();
  if (type == nullptr || !PyType_Check(type)) unsupported("a class pattern on a non-class");
  ValuePtr is_instance = call_builtin_named(ctx, "isinstance", {subject, cls});
  if (is_instance->py() != Py_True && is_instance->py() != Py_False) {
    unsupported("isinstance() in a class pattern");
  }
  if (is_instance->py() == Py_False) return none();
  PyRef keyword_names = concrete_object(names);
  if (!keyword_names || !PyTuple_Check(keyword_names.get())) {
    unsupported("MATCH_CLASS: attribute names not constant");
  }
  std::vector<PyObject*> attribute_names;  // borrowed from match_args or keyword_names
  PyRef match_args;
  bool match_self = false;
  if (positional > 0) {
    match_args = PyRef::steal(PyObject_GetAttrString(type, "__match_args__"));
    if (!match_args) {
      PyErr_Clear();
      // bool, int, float, str, bytes, bytearray, list, tuple, dict, set, frozenset: one
      // positional pattern matches the subject itself.
      static const PyTypeObject* const kSelfMatching[] = {
          &PyBool_Type,  &PyLong_Type,      &PyFloat_Type,    &PyUnicode_Type,
          &PyBytes_Type, &PyByteArray_Type, &PyList_Type,     &PyTuple_Type,
          &PyDict_Type,  &PySet_Type,       &PyFrozenSet_Type};
      for (const PyTypeObject* self_type : kSelfMatching) {
        match_self = match_self || PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type),
                                                    const_cast<PyTypeObject*>(self_type)) != 0;
      }
      if (!match_self || positional > 1) unsupported("a class pattern eager rejects");
    } else if (!PyTuple_CheckExact(match_args.get()) ||
               PyTuple_GET_SIZE(match_args.get()) < positional) {
      unsupported("a class pattern eager rejects (__match_args__)");
    } else {
      for (int i = 0; i < positional; ++i) {
        attribute_names.push_back(PyTuple_GET_ITEM(match_args.get(), i));
      }
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keyword_names.get()); ++i) {
    attribute_names.push_back(PyTuple_GET_ITEM(keyword_names.get(), i));
  }
  std::vector<ValuePtr> attributes;
  if (match_self) attributes.push_back(subject);
  for (size_t i = 0; i < attribute_names.size(); ++i) {
    PyObject* name = attribute_names[i];
    if (!PyUnicode_CheckExact(name)) unsupported("a class pattern eager rejects (a name)");
    for (size_t j = 0; j < i; ++j) {
      if (PyUnicode_Compare(attribute_names[j], name) == 0) {
        unsupported("a class pattern naming one attribute twice");  // eager's TypeError
      }
    }
    ValuePtr value = attribute_or_null(ctx, subject, name);
    if (!value) return none();
    attributes.push_back(value);
  }
  return TracedValue::tuple(std::move(attributes));
}

}  // namespace dynvm::vm
