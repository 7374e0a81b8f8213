// Instances of user classes, named tuples and partials made by the trace. Private to vm/.
#pragma once

#include <string>
#include <vector>

#include "inline_frame.h"

namespace dynvm::vm {

// A plain Python class whose instances the VM can model: a heap type with `type` as
// metaclass, object.__new__, and only Python classes in its MRO.
bool is_traceable_user_class(PyObject* type);  // borrowed
// class_value(*args, **kwargs) for such a class: a NewObject, its __init__ inlined.
ValuePtr new_object(TraceContext& ctx, const ValuePtr& class_value, std::vector<ValuePtr> args,
                    KwArgs kwargs);
// The instance attribute `name` of a NewObject, or null.
ValuePtr find_attribute(const ValuePtr& object, const std::string& name);
void store_attribute(const ValuePtr& object, const std::string& name, const ValuePtr& value);
// obj.name = value for a NewObject as Python does it: a property's setter, a slot, or an
// instance attribute (Unsupported where Python raises or runs code the VM does not model).
void set_new_object_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                              const ValuePtr& value);
// Whether instances of a class have a __dict__ (not every class of its MRO has __slots__).
bool has_instance_dict(PyObject* type);  // borrowed
// Whether `name` is a slot (a member descriptor from __slots__) of a class.
bool is_slot(PyObject* type, const std::string& name);  // borrowed
// del obj.name for a NewObject; false when it has no such instance attribute.
bool delete_attribute(const ValuePtr& object, const std::string& name);
// obj.name for a NewObject: properties, instance attributes, then class attributes.
ValuePtr new_object_attribute(TraceContext& ctx, const ValuePtr& object, const std::string& name);
// Calls the Python method `name` of the class of a NewObject, or of a concrete object with a
// source (kind Object); null when the class has none, or it is not Python code.
ValuePtr call_dunder(TraceContext& ctx, const ValuePtr& object, const std::string& name,
                     std::vector<ValuePtr> args);
// A named tuple class called with traced fields.
ValuePtr make_named_tuple(TraceContext& ctx, const ValuePtr& class_value,
                          const std::vector<ValuePtr>& args, const KwArgs& kwargs);
// A named tuple's field by name, or null.
ValuePtr named_tuple_field(const ValuePtr& tuple, const std::string& name);

}  // namespace dynvm::vm
