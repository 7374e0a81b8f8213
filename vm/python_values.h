// CPython helpers private to the guard files: texts of types, values and errors, the pending
// error, dict version tags and the equality ConstantMatch uses.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>

namespace dynvm::vm {

// GIL held for everything below.

// "int", "torch.Tensor", "torch.nn.modules.linear.Linear": the type's qualified name, with its
// module unless builtins. Never raises.
std::string type_name(PyTypeObject* type);

// repr(object) (borrowed), or "<unprintable T>" when repr raises. May run __repr__: use it on
// builtin values, or where running Python code is acceptable.
std::string repr_text(PyObject* object);

// Takes the pending Python error, leaving none set: "KeyError: 'w'"; "" when none is pending.
std::string take_error_text();

// Sets a pending Python error aside for its lifetime, so the code in between starts with no
// error set; at destruction drops any error that code left and restores the stashed one.
// Costs one pointer test when no error is pending.
class ErrorStash {
 public:
  ErrorStash();
  ~ErrorStash();
  ErrorStash(const ErrorStash&) = delete;
  ErrorStash& operator=(const ErrorStash&) = delete;

 private:
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* exception_ = nullptr;  // new reference while stashed
#else
  PyObject* type_ = nullptr;  // new references while stashed
  PyObject* value_ = nullptr;
  PyObject* traceback_ = nullptr;
#endif
};

// A dict's version tag (PEP 509): a new value from one interpreter-wide counter on every
// creation and mutation, so equal tags mean the same dict, unmodified. `dict` borrowed, a dict.
// Checked against CPython 3.12's Objects/dictobject.c and bytecodes.c: every mutation path
// (insertdict adding or replacing, insert_to_emptydict, setdefault, delitem/pop/popitem, clear)
// and the specialised STORE_ATTR_WITH_HINT store a fresh tag from _PyDict_NotifyEvent
// (DICT_NEXT_VERSION, a +256 step, or'ed with the dict's watcher bits); new dicts and copies get
// fresh tags; storing the identical object again is no mutation and keeps the tag. The tag is
// deprecated (PEP 699) but still maintained in 3.12; the low 8 bits (DICT_MAX_WATCHERS) are
// watcher flags that PyDict_Watch sets without a mutation, so they are dropped here. 3.11 steps
// by 1 and has no watcher bits. Instance attributes kept inline (no dict materialised yet) have
// no tag: instance_dict() materialises the dict, after which stores go through it.
inline uint64_t dict_version(PyObject* dict) {
#if PY_VERSION_HEX >= 0x030D0000
#error "dict_version: ma_version_tag is gone after 3.12"
#elif PY_VERSION_HEX >= 0x030C0000
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag >> 8;  // DICT_MAX_WATCHERS
#pragma GCC diagnostic pop
#else
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;
#endif
}

// The type's attribute-cache version tag when it is valid, else 0. A valid tag that is still
// the same means the type and its bases were not modified since (CPython invalidates the tags
// of a type and its subclasses on every change, and never reuses a tag).
inline unsigned int type_version(PyTypeObject* type) {
  return PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) ? type->tp_version_tag : 0u;
}

// Whether instances of `type` read attributes as object.__getattribute__ does (a __getattr__
// fallback, as nn.Module has, is allowed). GIL held; never raises.
bool has_generic_getattribute(PyTypeObject* type);

// Borrowed: the object's own dict (created if it has a dict slot and none yet), or nullptr
// (no Python error set) when it has none.
PyObject* instance_dict(PyObject* object);

// Whether ConstantMatch can guard `value` (borrowed): None, bool, int, float, str, bytes,
// complex, a torch.device, a tuple of those, or a set or frozenset (is_guardable_set); exact
// types only (no subclasses such as IntEnum).
bool is_guardable_constant(PyObject* value);
// A set or frozenset whose elements are None, int (not bool), str, bytes, or classes that
// compare by identity (a set of registered types).
bool is_guardable_set(PyObject* value);

// type(value) is type(constant) and value == constant, for a guardable `constant`; both
// borrowed. Runs no Python code and never raises. Floats (and complex parts) also compare
// the sign of zero, and a NaN matches nothing: a float constant that is NaN only costs
// retraces.
bool constant_matches(PyObject* value, PyObject* constant);

// What the end of a `try ... except*` re-raises: `orig` the exception the statement caught,
// `raised` a list of what its clauses raised and the part none matched (None for none), as
// PREP_RERAISE_STAR (3.11) and CALL_INTRINSIC_2's PREP_RERAISE_STAR (3.12) compute it. A new
// reference, or null with a Python error set.
PyObject* prep_reraise_star(PyObject* orig, PyObject* raised);
// Whether `exception` is an ExceptionGroup or BaseExceptionGroup, and so is every group in
// it: splitting it runs no derive() of a subclass.
bool is_plain_exception_group(PyObject* exception);

}  // namespace dynvm::vm
