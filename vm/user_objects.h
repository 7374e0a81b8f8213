// Instances of user classes, named tuples and partials made by the trace. Private to vm/.
#pragma once

#include <string>
#include <vector>

#include "inline_frame.h"

namespace dynvm::vm {

// A plain Python class whose instances the VM can model: a heap type with `type` as
// metaclass, the __new__ of its builtin base, and only Python classes in its MRO besides
// `object` and, for a mapping class, `dict` or `collections.OrderedDict`.
bool is_traceable_user_class(PyObject* type);  // borrowed
// The builtin dict type (dict or OrderedDict) whose instance layout a heap class extends, or
// null for a class that does not derive from dict.
PyTypeObject* builtin_dict_base(PyObject* type);  // borrowed
// class_value(*args, **kwargs) for such a class: a NewObject, its __init__ inlined.
ValuePtr new_object(TraceContext& ctx, const ValuePtr& class_value, std::vector<ValuePtr> args,
                    KwArgs kwargs);
// The instance attribute `name` of a NewObject, or null.
ValuePtr find_attribute(const ValuePtr& object, const std::string& name);
// Whether instances of a class have a __dict__ (not every class of its MRO has __slots__).
bool has_instance_dict(PyObject* type);  // borrowed
// Whether a class of the MRO declares __slots__: its instances keep those attributes outside
// __dict__.
bool declares_slots(PyObject* type);  // borrowed
// Whether `name` is a slot (a member descriptor from __slots__) of a class.
bool is_slot(PyObject* type, const std::string& name);  // borrowed
// obj.name = value for a NewObject, as Python does it: the class's own __setattr__ (inlined)
// or object.__setattr__.
void set_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                   const ValuePtr& value);
// del obj.name for a NewObject, through the class's own __delattr__ or object.__delattr__.
void delete_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name);
// obj.name for a NewObject: the class's own __getattribute__ (inlined), or data descriptors
// (properties), instance attributes, then class attributes, and __getattr__ when missing.
ValuePtr new_object_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name);
// Calls the method `name` of the class of a NewObject (Python code, inlined, or a method of
// its builtin base that call_builtin_base_method models), or the Python method of a concrete
// object with a source (kind Object); null when the class has none the VM can call.
ValuePtr call_dunder(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                     std::vector<ValuePtr> args);
// A method of `object`, `dict` or `OrderedDict` (a method or slot wrapper descriptor,
// borrowed) called with a NewObject, or a dict the trace holds, as its first argument:
// object.__setattr__(obj, name, value), dict.__setitem__(d, key, value), OrderedDict.keys(d),
// ... Null when the descriptor or the method is not one modelled here; Unsupported when
// eager would raise (a descriptor applied to an instance of another type).
ValuePtr call_builtin_base_method(TraceContext& ctx, PyObject* descriptor,
                                  const std::vector<ValuePtr>& args, const KwArgs& kwargs);
// The key/value pairs that dict(value), {**value} or d.update(value) read from a NewObject
// that is a mapping (a dict subclass, or a class with keys() and __getitem__). False for
// other values.
bool new_object_mapping_items(TraceContext& ctx, const ValuePtr& value, std::vector<ValuePtr>* keys,
                              std::vector<ValuePtr>* values);
// Python truthiness of a NewObject when it is known without running its code (no __bool__ or
// __len__ of Python code): sets *known false otherwise.
bool new_object_truth(const ValuePtr& object, bool* known);
// Python truthiness of any traced value, running (inlining) a Python __bool__ or __len__ of the
// class of an object the trace made or read from a source (a cache object passed in).
bool truth_value(TraceContext& ctx, const ValuePtr& value);
// A named tuple class called with traced fields.
ValuePtr make_named_tuple(TraceContext& ctx, const ValuePtr& class_value,
                          const std::vector<ValuePtr>& args, const KwArgs& kwargs);
// A named tuple's field by name, or null.
ValuePtr named_tuple_field(const ValuePtr& tuple, const std::string& name);

}  // namespace dynvm::vm
