// CPython helpers private to the guard files: texts, the pending error, instance dicts and
// the exact-type equality of ConstantMatch.
#include "python_values.h"

#include <cmath>
#include <cstring>

#include "dynvm/support/py_ref.h"
#include "known_objects.h"

namespace dynvm::vm {

namespace {

// A torch.device: a value type (equal devices are separate objects) whose == is C code.
bool is_torch_device(PyObject* value) {
  const KnownObjects* known = KnownObjects::get();
  if (known == nullptr) {
    PyErr_Clear();
    return false;
  }
  return reinterpret_cast<PyObject*>(Py_TYPE(value)) == known->device_type.get();
}

// UTF-8 of a str (borrowed), or "" for anything else or on failure (error cleared).
std::string utf8(PyObject* text) {
  if (text == nullptr || !PyUnicode_Check(text)) return "";
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data == nullptr) {
    PyErr_Clear();
    return "";
  }
  return std::string(data, static_cast<size_t>(size));
}

bool same_double(double a, double b) { return a == b && std::signbit(a) == std::signbit(b); }

}  // namespace

std::string type_name(PyTypeObject* type) {
  ErrorStash stash;
  PyRef qualname = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type),
                                                       "__qualname__"));  // new
  std::string name = utf8(qualname.get());
  PyErr_Clear();
  if (name.empty()) name = type->tp_name;
  PyRef module =
      PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));  // new
  std::string module_name = utf8(module.get());
  PyErr_Clear();
  if (module_name.empty() || module_name == "builtins") return name;
  return module_name + "." + name;
}

std::string repr_text(PyObject* object) {
  ErrorStash stash;
  PyRef repr = PyRef::steal(PyObject_Repr(object));  // new
  if (!repr) {
    PyErr_Clear();
    return std::string("<unprintable ") + Py_TYPE(object)->tp_name + ">";
  }
  return utf8(repr.get());
}

std::string take_error_text() {
  if (!PyErr_Occurred()) return "";
#if PY_VERSION_HEX >= 0x030C0000
  PyRef value = PyRef::steal(PyErr_GetRaisedException());  // new
  PyTypeObject* type = Py_TYPE(value.get());
#else
  PyObject* raw_type = nullptr;  // new references, owned by the PyRefs below
  PyObject* raw_value = nullptr;
  PyObject* raw_traceback = nullptr;
  PyErr_Fetch(&raw_type, &raw_value, &raw_traceback);
  PyErr_NormalizeException(&raw_type, &raw_value, &raw_traceback);
  PyRef type_ref = PyRef::steal(raw_type);
  PyRef value = PyRef::steal(raw_value);
  PyRef traceback = PyRef::steal(raw_traceback);
  PyTypeObject* type = value ? Py_TYPE(value.get()) : reinterpret_cast<PyTypeObject*>(raw_type);
#endif
  std::string text = type != nullptr ? type->tp_name : "error";
  if (value) {
    PyRef message = PyRef::steal(PyObject_Str(value.get()));  // new
    std::string message_text = utf8(message.get());
    PyErr_Clear();
    if (!message_text.empty()) text += ": " + message_text;
  }
  return text;
}

ErrorStash::ErrorStash() {
  if (!PyErr_Occurred()) return;
#if PY_VERSION_HEX >= 0x030C0000
  exception_ = PyErr_GetRaisedException();
#else
  PyErr_Fetch(&type_, &value_, &traceback_);
#endif
}

ErrorStash::~ErrorStash() {
  if (PyErr_Occurred()) PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
  if (exception_ != nullptr) PyErr_SetRaisedException(exception_);  // steals exception_
#else
  if (type_ != nullptr) PyErr_Restore(type_, value_, traceback_);  // steals all three
#endif
}

bool has_generic_getattribute(PyTypeObject* type) {
  static PyObject* name = PyUnicode_InternFromString("__getattribute__");  // kept for the process
  if (name == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* own = _PyType_Lookup(type, name);                    // borrowed
  PyObject* generic = _PyType_Lookup(&PyBaseObject_Type, name);  // borrowed
  return own != nullptr && own == generic;
}

PyObject* instance_dict(PyObject* object) {
  PyObject** slot = _PyObject_GetDictPtr(object);  // into the object; materialises managed dicts
  if (slot == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  if (*slot != nullptr) return *slot;
  PyRef created = PyRef::steal(PyObject_GenericGetDict(object, nullptr));  // new; also stored
  if (!created) {
    PyErr_Clear();
    return nullptr;
  }
  return *slot == created.get() ? *slot : nullptr;
}

bool is_guardable_constant(PyObject* value) {
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
      PyFloat_CheckExact(value) || PyUnicode_CheckExact(value) || PyBytes_CheckExact(value) ||
      PyComplex_CheckExact(value) || is_torch_device(value)) {
    return true;
  }
  if (PyAnySet_CheckExact(value)) return is_guardable_set(value);
  if (!PyTuple_CheckExact(value)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
    if (!is_guardable_constant(PyTuple_GET_ITEM(value, i))) return false;
  }
  return true;
}

bool is_guardable_set(PyObject* value) {
  if (!PyAnySet_CheckExact(value)) return false;
  // Elements that are equal only when they are the same value of the same type (no bool
  // beside int, no float), so that equal sets answer every question alike.
  Py_ssize_t pos = 0;
  PyObject* key;
  Py_hash_t hash;
  while (_PySet_NextEntry(value, &pos, &key, &hash)) {  // borrowed
    if (key == Py_None || PyLong_CheckExact(key) || PyUnicode_CheckExact(key) ||
        PyBytes_CheckExact(key)) {
      continue;
    }
    // A class whose metaclass compares and hashes as type does: by identity, no Python code.
    if (PyType_Check(key) && Py_TYPE(key)->tp_richcompare == PyType_Type.tp_richcompare &&
        Py_TYPE(key)->tp_hash == PyType_Type.tp_hash) {
      continue;
    }
    return false;
  }
  return true;
}

PyObject* prep_reraise_star(PyObject* orig, PyObject* raised) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Exc_PrepReraiseStar(orig, raised);
#else
  // 3.11 does not export its own (_PyExc_PrepReraiseStar): dynvm._tracing has it in Python.
  PyRef tracing = PyRef::steal(PyImport_ImportModule("dynvm._tracing"));
  if (!tracing) return nullptr;
  return PyObject_CallMethod(tracing.get(), "prep_reraise_star", "OO", orig, raised);
#endif
}

bool is_plain_exception_group(PyObject* exception) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(exception));
  PyObject* builtins = PyEval_GetBuiltins();  // borrowed
  PyObject* group = builtins ? PyDict_GetItemString(builtins, "ExceptionGroup") : nullptr;
  if (type != PyExc_BaseExceptionGroup && (group == nullptr || type != group)) return false;
  PyRef members = PyRef::steal(PyObject_GetAttrString(exception, "exceptions"));
  if (!members || !PyTuple_Check(members.get())) {
    PyErr_Clear();
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(members.get()); ++i) {
    PyObject* member = PyTuple_GET_ITEM(members.get(), i);
    if (PyObject_TypeCheck(member, reinterpret_cast<PyTypeObject*>(PyExc_BaseExceptionGroup)) &&
        !is_plain_exception_group(member)) {
      return false;
    }
  }
  return true;
}

bool constant_matches(PyObject* value, PyObject* constant) {
  PyTypeObject* type = Py_TYPE(constant);
  if (Py_TYPE(value) != type) return false;
  if (type == &PySet_Type || type == &PyFrozenSet_Type) {
    // `constant` is a copy (GuardSet keeps one): the same elements, none of another type.
    if (PySet_GET_SIZE(value) != PySet_GET_SIZE(constant) || !is_guardable_set(value)) {
      return false;
    }
    Py_ssize_t pos = 0;
    PyObject* key;
    Py_hash_t hash;
    while (_PySet_NextEntry(value, &pos, &key, &hash)) {  // borrowed
      int in = PySet_Contains(constant, key);
      if (in < 0) PyErr_Clear();
      if (in != 1) return false;
    }
    return true;
  }
  if (type == &PyFloat_Type) {
    return same_double(PyFloat_AS_DOUBLE(value), PyFloat_AS_DOUBLE(constant));
  }
  if (value == constant) return true;  // None, bool, small ints, interned str
  if (type == &PyLong_Type) {
    int value_overflow = 0;
    int constant_overflow = 0;
    long long a = PyLong_AsLongLongAndOverflow(value, &value_overflow);
    long long b = PyLong_AsLongLongAndOverflow(constant, &constant_overflow);
    if (value_overflow == 0 && constant_overflow == 0) return a == b;
    int equal = PyObject_RichCompareBool(value, constant, Py_EQ);  // int == int: no Python code
    if (equal < 0) PyErr_Clear();
    return equal == 1;
  }
  if (type == &PyUnicode_Type) {
    if (PyUnicode_GET_LENGTH(value) != PyUnicode_GET_LENGTH(constant)) return false;
    int order = PyUnicode_Compare(value, constant);
    if (order == -1 && PyErr_Occurred()) PyErr_Clear();
    return order == 0;
  }
  if (type == &PyBytes_Type) {
    Py_ssize_t size = PyBytes_GET_SIZE(value);
    return size == PyBytes_GET_SIZE(constant) &&
           std::memcmp(PyBytes_AS_STRING(value), PyBytes_AS_STRING(constant),
                       static_cast<size_t>(size)) == 0;
  }
  if (type == &PyComplex_Type) {
    Py_complex a = reinterpret_cast<PyComplexObject*>(value)->cval;
    Py_complex b = reinterpret_cast<PyComplexObject*>(constant)->cval;
    return same_double(a.real, b.real) && same_double(a.imag, b.imag);
  }
  if (type == &PyTuple_Type) {
    Py_ssize_t size = PyTuple_GET_SIZE(value);
    if (size != PyTuple_GET_SIZE(constant)) return false;
    for (Py_ssize_t i = 0; i < size; ++i) {
      if (!constant_matches(PyTuple_GET_ITEM(value, i), PyTuple_GET_ITEM(constant, i))) {
        return false;
      }
    }
    return true;
  }
  if (is_torch_device(value)) {
    int equal = PyObject_RichCompareBool(value, constant, Py_EQ);
    if (equal < 0) PyErr_Clear();
    return equal == 1;
  }
  return false;  // None and bool are singletons: identity decided above
}

}  // namespace dynvm::vm
