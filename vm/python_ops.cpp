// The operators of the language over traced values: arithmetic, comparisons,
// subscripts, membership and iteration. Tensor operands go to the bridge; concrete
// operands are computed by CPython itself so the semantics are exactly Python's.
#include <memory>
#include <string>
#include <utility>

#include "inline_frame.h"
#include "known_objects.h"
#include "lazy_items.h"
#include "python_values.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

namespace {

const KnownObjects& known() { return *KnownObjects::get(); }

// operator-module names of BINARY_OP's arguments (NB_ADD = 0 ... NB_INPLACE_XOR = 25).
const char* const kBinaryOperatorNames[] = {
    "add",    "and_", "floordiv", "lshift", "matmul",  "mul",  "mod",       "or_",     "pow",
    "rshift", "sub",  "truediv",  "xor",    "iadd",    "iand", "ifloordiv", "ilshift", "imatmul",
    "imul",   "imod", "ior",      "ipow",   "irshift", "isub", "itruediv",  "ixor"};
const char* const kCompareOperatorNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};

PyObject* operator_function(const char* name) {  // borrowed
  PyObject* fn = PyObject_GetAttrString(known().operator_module.get(), name);
  Py_XDECREF(fn);  // the operator module keeps it alive
  if (fn == nullptr) unsupported_from_python_error(std::string("operator.") + name);
  return fn;
}

ValuePtr concrete_call(PyObject* fn, std::initializer_list<PyObject*> args) {
  PyRef tuple = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  Py_ssize_t i = 0;
  for (PyObject* a : args) {
    Py_INCREF(a);
    PyTuple_SET_ITEM(tuple.get(), i++, a);
  }
  PyRef result = PyRef::steal(PyObject_Call(fn, tuple.get(), nullptr));
  if (!result) unsupported_from_python_error("operator");
  if (PyTuple_CheckExact(result.get())) {
    std::vector<ValuePtr> items;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(result.get()); ++j) {
      items.push_back(TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(result.get(), j))));
    }
    auto t = TracedValue::tuple(std::move(items));
    t->obj = result;
    return t;
  }
  if (PyObject_TypeCheck(result.get(), reinterpret_cast<PyTypeObject*>(known().size_type.get()))) {
    std::vector<ValuePtr> items;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(result.get()); ++j) {
      items.push_back(TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(result.get(), j))));
    }
    auto t = TracedValue::tuple(std::move(items));
    t->is_size = true;
    t->obj = result;
    return t;
  }
  return fresh_constant(std::move(result));
}

// An operand of a Python operator as an object: a symbolic size (dynamic shapes) stays
// symbolic, so arithmetic and comparisons on sizes are expressions, not guarded values.
PyRef operand_object(const ValuePtr& value) {
  if (value->is_constant() && known().is_symbolic_number(value->py())) return value->obj;
  return concrete_object(value);
}

// A Python integer index from a traced key, or false.
bool constant_index(const ValuePtr& key, Py_ssize_t* out) {
  if (!key->is_constant() || !PyIndex_Check(key->py()) || PyBool_Check(key->py())) {
    if (!(key->is_constant() && PyBool_Check(key->py()))) return false;
  }
  Py_ssize_t i = PyNumber_AsSsize_t(key->py(), PyExc_IndexError);
  if (i == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  *out = i;
  return true;
}

std::vector<ValuePtr> module_children(TraceContext& ctx, const ValuePtr& module_value) {
  PyObject* module = module_value->py();
  const SourcePtr& src = module_value->source;
  // A slice the trace took (`self.layers[:n]`): its children are those of the container
  // sliced, read from there.
  if (!src && !module_value->items.empty()) return module_value->items;
  if (!src) unsupported("iterating an nn.Module with no source");
  PyRef dict = PyRef::steal(PyObject_GenericGetDict(module, nullptr));
  PyObject* children = dict ? PyDict_GetItemString(dict.get(), "_modules") : nullptr;
  if (children == nullptr) unsupported("iterating a module without children");
  ctx.guard(TraceContext::GuardKind::DictKeys, Source::attr(src, "_modules"), children);
  std::vector<ValuePtr> out;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(children, &pos, &k, &v)) {
    if (v == Py_None) continue;
    out.push_back(
        ctx.wrap(v, Source::module_member(Source::Kind::ModuleChild, src, PyUnicode_AsUTF8(k))));
  }
  return out;
}

namespace {

// container[key] for a ModuleList or Sequential and a constant slice: the new container
// eager makes, made once here (its children are the same modules, read from `container`).
// Null when `key` is not a constant slice or the class indexes in its own way.
ValuePtr module_slice(const ValuePtr& container, const std::vector<ValuePtr>& children,
                      const ValuePtr& key) {
  PyRef slice = concrete_object(key);
  if (!slice || !PySlice_Check(slice.get())) return nullptr;
  PyObject* module = container->py();
  PyRef name = PyRef::steal(PyUnicode_InternFromString("__getitem__"));
  PyObject* own = _PyType_Lookup(Py_TYPE(module), name.get());  // borrowed
  const KnownObjects& k = known();
  bool builtin_getitem = false;
  for (const PyRef& base : {k.module_list_type, k.sequential_type}) {
    PyObject* theirs = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(base.get()), name.get());
    builtin_getitem = builtin_getitem || (own != nullptr && own == theirs);
  }
  if (!builtin_getitem) return nullptr;
  Py_ssize_t start = 0, stop = 0, step = 0;
  if (PySlice_Unpack(slice.get(), &start, &stop, &step) < 0) {
    unsupported_from_python_error("a module slice");
  }
  Py_ssize_t count =
      PySlice_AdjustIndices(static_cast<Py_ssize_t>(children.size()), &start, &stop, step);
  PyRef part = PyRef::steal(PyObject_GetItem(module, slice.get()));
  if (!part) unsupported_from_python_error("slicing a " + container->describe());
  ValuePtr value = TracedValue::object(std::move(part), nullptr);
  for (Py_ssize_t i = 0; i < count; ++i) {
    value->items.push_back(children[static_cast<size_t>(start + i * step)]);
  }
  if (value->items.empty()) unsupported("an empty slice of a " + container->describe());
  return value;
}

}  // namespace

// An object of the typing module (List, Optional, a generic alias): immutable, and
// subscripting it (List[torch.Tensor]) is pure.
bool is_typing_object(const ValuePtr& value) {
  if (!value->is(TracedValue::Kind::Object) || value->py() == nullptr) return false;
  PyRef module = PyRef::steal(
      PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(value->py())), "__module__"));
  if (!module) PyErr_Clear();
  return module && PyUnicode_Check(module.get()) &&
         PyUnicode_CompareWithASCIIString(module.get(), "typing") == 0;
}

bool is_module_container(PyObject* o, const PyRef& type) {
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(type.get()));
}

}  // namespace

ValuePtr binary_operation(TraceContext& ctx, int op, const ValuePtr& lhs, const ValuePtr& rhs) {
  if (op < 0 || op >= static_cast<int>(sizeof(kBinaryOperatorNames) / sizeof(char*))) {
    unsupported("binary operator " + std::to_string(op));
  }
  const char* name = kBinaryOperatorNames[op];
  if (lhs->is_tensor() || rhs->is_tensor()) {
    static const char* const kBitwise[] = {
        nullptr,      "bitwise_and", nullptr, "bitwise_left_shift",  nullptr, nullptr,
        nullptr,      "bitwise_or",  nullptr, "bitwise_right_shift", nullptr, nullptr,
        "bitwise_xor"};
    int plain = op >= 13 ? op - 13 : op;
    if (op < 13 && lhs->is_tensor() && rhs->is_constant() && PyLong_Check(rhs->py()) &&
        !PyBool_Check(rhs->py()) && kBitwise[plain] != nullptr) {
      // x | 8 is torch.bitwise_or(x, 8); the operator form fails on fake tensors in
      // some torch versions.
      PyRef fn = PyRef::steal(PyObject_GetAttrString(known().torch.get(), kBitwise[plain]));
      if (fn) return ctx.bridge->call(fn.get(), {lhs, rhs}, {});
      PyErr_Clear();
    }
    return ctx.bridge->call(operator_function(name), {lhs, rhs}, {});
  }
  bool inplace = op >= 13;
  int base = inplace ? op - 13 : op;
  if (lhs->is(TracedValue::Kind::NewObject) || rhs->is(TracedValue::Kind::NewObject)) {
    static const char* const kDunders[] = {"add", "and",     "floordiv", "lshift", "matmul",
                                           "mul", "mod",     "or",       "pow",    "rshift",
                                           "sub", "truediv", "xor"};
    std::string method = std::string("__") + kDunders[base] + "__";
    if (lhs->is(TracedValue::Kind::NewObject)) {
      if (inplace) {
        if (ValuePtr v = call_dunder(ctx, lhs, "__i" + method.substr(2), {rhs})) return v;
      }
      if (ValuePtr v = call_dunder(ctx, lhs, method, {rhs})) return v;
    }
    if (rhs->is(TracedValue::Kind::NewObject)) {
      if (ValuePtr v = call_dunder(ctx, rhs, "__r" + method.substr(2), {lhs})) return v;
    }
    unsupported(std::string("operator ") + name + " on a " + lhs->describe() + " and a " +
                rhs->describe());
  }
  if (base == 7 && lhs->is(TracedValue::Kind::Dict) && rhs->is(TracedValue::Kind::Dict)) {
    // d1 | d2: a new dict with rhs winning (|= mutates lhs).
    if (inplace && !ctx.track_mutation(lhs)) unsupported("|= on a dict that cannot be tracked");
    ValuePtr out = inplace ? lhs : TracedValue::dict(lhs->keys, lhs->items, true);
    for (size_t i = 0; i < rhs->keys.size(); ++i) {
      bool replaced = false;
      for (size_t j = 0; j < out->keys.size(); ++j) {
        if (PyObject_RichCompareBool(out->keys[j]->py(), rhs->keys[i]->py(), Py_EQ) == 1) {
          out->items[j] = rhs->items[i];
          replaced = true;
        }
      }
      if (!replaced) {
        out->keys.push_back(rhs->keys[i]);
        out->items.push_back(rhs->items[i]);
      }
    }
    PyErr_Clear();
    return out;
  }
  // Sequence concatenation and repetition on traced containers (a torch.Size operand is
  // computed concretely below so the result stays a torch.Size).
  if (base == 0 && lhs->is_sequence() && rhs->is_sequence() && !lhs->is_size) {
    if (inplace && lhs->is(TracedValue::Kind::List)) {
      if (!ctx.track_mutation(lhs)) unsupported("+= on a list that cannot be tracked");
      for (auto& i : rhs->items) lhs->items.push_back(i);
      return lhs;
    }
    if (lhs->kind == rhs->kind) {
      std::vector<ValuePtr> items = lhs->items;
      for (auto& i : rhs->items) items.push_back(i);
      if (lhs->is(TracedValue::Kind::List)) return TracedValue::list(std::move(items), true);
      return TracedValue::tuple(std::move(items));
    }
  }
  if (base == 5 && (lhs->is_sequence() != rhs->is_sequence())) {
    const ValuePtr& seq = lhs->is_sequence() ? lhs : rhs;
    const ValuePtr& count = lhs->is_sequence() ? rhs : lhs;
    Py_ssize_t n = 0;
    if (!seq->is_size && constant_index(count, &n)) {
      std::vector<ValuePtr> items;
      for (Py_ssize_t r = 0; r < n; ++r) {
        for (auto& i : seq->items) items.push_back(i);
      }
      if (seq->is(TracedValue::Kind::List)) return TracedValue::list(std::move(items), true);
      return TracedValue::tuple(std::move(items));
    }
  }
  PyRef a = operand_object(lhs);
  PyRef b = operand_object(rhs);
  if (!a || !b) {
    unsupported(std::string("operator ") + name + " on a " + lhs->describe() + " and a " +
                rhs->describe());
  }
  if (inplace && lhs->source && PySet_Check(a.get())) {
    // `s |= ...` on a set the caller has would change the caller's object while tracing,
    // and no graph replays it: eager runs it on the caller's set.
    unsupported(std::string("operator ") + name + " on a set that existed before the call");
  }
  ValuePtr result = concrete_call(operator_function(name), {a.get(), b.get()});
  if (PySet_CheckExact(result->py())) {
    // `s |= t` on a set the trace made changes it and leaves every name of it bound to it:
    // the value is the same traced value (`s | t` makes a set: fresh_constant). Before, it
    // was a constant set apart from `s`, so a method call on it broke the graph with the
    // set rebuilt apart from its method's `self`, and `s.discard(x)` after `s |= t`
    // changed a set nothing returned.
    if (inplace && result->py() == a.get()) return lhs;
  }
  return result;
}

ValuePtr compare_operation(TraceContext& ctx, int op, const ValuePtr& lhs, const ValuePtr& rhs) {
  if (op < 0 || op > 5) unsupported("comparison " + std::to_string(op));
  const char* name = kCompareOperatorNames[op];
  if (lhs->is_tensor() || rhs->is_tensor()) {
    return ctx.bridge->call(operator_function(name), {lhs, rhs}, {});
  }
  if ((op == 2 || op == 3) && lhs->is_sequence() && rhs->is_sequence() && lhs->kind == rhs->kind &&
      !lhs->is_size && !rhs->is_size) {
    // list == list compares items, identity first as Python does: two lists holding the
    // same tensors are equal without comparing tensor values.
    bool equal = lhs->items.size() == rhs->items.size();
    for (size_t i = 0; equal && i < lhs->items.size(); ++i) {
      const ValuePtr& a = lhs->items[i];
      const ValuePtr& b = rhs->items[i];
      if (a == b || (a->is_tensor() && b->is_tensor() && a->obj.get() == b->obj.get())) continue;
      ValuePtr item = compare_operation(ctx, 2, a, b);
      equal = truthiness(item);
    }
    bool result = op == 2 ? equal : !equal;
    return TracedValue::constant(PyRef::borrow(result ? Py_True : Py_False));
  }
  PyRef a = operand_object(lhs);
  PyRef b = operand_object(rhs);
  if (!a || !b) {
    unsupported(std::string("comparison ") + name + " of a " + lhs->describe() + " and a " +
                rhs->describe());
  }
  return concrete_call(operator_function(name), {a.get(), b.get()});
}

ValuePtr unary_operation(TraceContext& ctx, const char* name, const ValuePtr& operand) {
  if (operand->is_tensor()) return ctx.bridge->call(operator_function(name), {operand}, {});
  PyRef a = operand_object(operand);
  if (!a) unsupported(std::string("operator ") + name + " on a " + operand->describe());
  return concrete_call(operator_function(name), {a.get()});
}

ValuePtr subscript(TraceContext& ctx, const ValuePtr& container, const ValuePtr& key) {
  if (container->is(TracedValue::Kind::NewObject)) {
    if (ValuePtr v = call_dunder(ctx, container, "__getitem__", {key})) return v;
    unsupported("indexing a " + container->describe());
  }
  if (container->is_tensor()) {
    return ctx.bridge->call(operator_function("getitem"), {container, key}, {});
  }
  if (container->is_sequence()) {
    Py_ssize_t n = static_cast<Py_ssize_t>(container->items.size());
    Py_ssize_t i = 0;
    if (constant_index(key, &i)) {
      if (i < 0) i += n;
      if (i < 0 || i >= n) unsupported("index out of range");
      return container->items[static_cast<size_t>(i)];
    }
    if (key->is(TracedValue::Kind::Slice)) {
      PyRef slice = concrete_object(key);
      if (!slice) unsupported("slicing with abstract bounds");
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(slice.get(), &start, &stop, &step) < 0) {
        unsupported_from_python_error("slice");
      }
      Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
      std::vector<ValuePtr> items;
      for (Py_ssize_t j = 0; j < len; ++j) {
        items.push_back(container->items[static_cast<size_t>(start + j * step)]);
      }
      if (container->is(TracedValue::Kind::List)) return TracedValue::list(std::move(items), true);
      ValuePtr t = TracedValue::tuple(std::move(items));
      t->is_size = container->is_size;
      return t;
    }
    unsupported("indexing a " + container->describe() + " with a " + key->describe());
  }
  if (container->is(TracedValue::Kind::Dict) && key->is_tensor()) {
    // A tensor key hashes by identity: the same graph input, or the live tensor it stands for
    // among keys the dict held before the call (an optimizer's state by parameter).
    PyObject* real = ctx.bridge->real_input(key);
    for (size_t j = 0; j < container->keys.size(); ++j) {
      const ValuePtr& held = container->keys[j];
      if (held == key || (real != nullptr && held->is_constant() && held->py() == real)) {
        return container->items[j];
      }
    }
    unsupported("dict lookup with a tensor key the dict does not hold");
  }
  if (container->is(TracedValue::Kind::Dict)) {
    PyRef k = concrete_object(key);
    if (!k) unsupported("dict lookup with an abstract key");
    for (size_t j = 0; j < container->keys.size(); ++j) {
      int eq = PyObject_RichCompareBool(container->keys[j]->py(), k.get(), Py_EQ);
      if (eq < 0) unsupported_from_python_error("dict key comparison");
      if (eq) return container->items[j];
    }
    if (container->function && container->mutable_here && !container->function->is_constant()) {
      // A defaultdict the trace made: the factory's value, inserted under the key.
      ValuePtr made = call_value(ctx, container->function, {}, {});
      container->keys.push_back(key->is_constant() ? key : TracedValue::constant(k));
      container->items.push_back(made);
      return made;
    }
    key_missing(k.get());  // the trace knows every key the dict has
  }
  if (is_typing_object(container) ||
      (container->is(TracedValue::Kind::Object) && container->py() != nullptr &&
       PyType_Check(container->py()) && !is_module(container->py()))) {
    // A typing form or a class (list[Tensor] in typing.cast): the generic alias it makes.
    PyRef k = concrete_object(key);
    if (!k) unsupported("subscripting a typing object with a " + key->describe());
    return concrete_call(operator_function("getitem"), {container->py(), k.get()});
  }
  if (container->is(TracedValue::Kind::Object) && !is_module(container->py())) {
    // A mapping or sequence class of Python code (transformers' AttentionInterface).
    if (ValuePtr v = call_dunder(ctx, container, "__getitem__", {key})) return v;
  }
  if (container->is(TracedValue::Kind::Object) && is_module(container->py())) {
    PyObject* module = container->py();
    const KnownObjects& k = known();
    if (is_module_container(module, k.module_dict_type)) {
      PyRef name = concrete_object(key);
      if (!name || !PyUnicode_Check(name.get())) unsupported("ModuleDict key");
      for (auto& child : module_children(ctx, container)) {
        if (child->source->name() == PyUnicode_AsUTF8(name.get())) return child;
      }
      unsupported("KeyError in ModuleDict");
    }
    if (is_module_container(module, k.sequential_type) ||
        is_module_container(module, k.module_list_type)) {
      std::vector<ValuePtr> children = module_children(ctx, container);
      Py_ssize_t n = static_cast<Py_ssize_t>(children.size()), i = 0;
      if (constant_index(key, &i)) {
        if (i < 0) i += n;
        if (i < 0 || i >= n) unsupported("module index out of range");
        return children[static_cast<size_t>(i)];
      }
      if (ValuePtr part = module_slice(container, children, key)) return part;
    }
    unsupported("indexing a " + container->describe());
  }
  PyRef c = concrete_object(container);
  PyRef k = concrete_object(key);
  if (c && k && (container->is_constant() || container->is(TracedValue::Kind::Range))) {
    return concrete_call(operator_function("getitem"), {c.get(), k.get()});
  }
  unsupported("indexing a " + container->describe());
}

void store_subscript(TraceContext& ctx, const ValuePtr& container, const ValuePtr& key,
                     const ValuePtr& value) {
  if (container->is_tensor()) {
    ctx.bridge->call(operator_function("setitem"), {container, key, value}, {});
    return;
  }
  if (container->is(TracedValue::Kind::NewObject)) {
    if (!call_dunder(ctx, container, "__setitem__", {key, value})) {
      unsupported("item assignment to a " + container->describe());
    }
    return;
  }
  if (container->is(TracedValue::Kind::Object) && container->source &&
      !is_module(container->py())) {
    // An object of a Python class (a dict subclass being built): its own __setitem__, whose
    // writes to the object are side effects.
    if (call_dunder(ctx, container, "__setitem__", {key, value})) return;
  }
  if (!ctx.track_mutation(container)) {
    unsupported("item assignment to a " + container->describe() + " that existed before the call");
  }
  if (container->is(TracedValue::Kind::List)) {
    Py_ssize_t i = 0;
    Py_ssize_t n = static_cast<Py_ssize_t>(container->items.size());
    if (!constant_index(key, &i)) unsupported("list assignment with a non-integer index");
    if (i < 0) i += n;
    if (i < 0 || i >= n) unsupported("list assignment index out of range");
    container->items[static_cast<size_t>(i)] = value;
    return;
  }
  if (container->is(TracedValue::Kind::Dict)) {
    PyRef k = concrete_object(key);
    if (!k || !key->is_constant()) unsupported("dict assignment with an abstract key");
    for (size_t j = 0; j < container->keys.size(); ++j) {
      int eq = PyObject_RichCompareBool(container->keys[j]->py(), k.get(), Py_EQ);
      if (eq < 0) unsupported_from_python_error("dict key comparison");
      if (eq) {
        container->items[j] = value;
        return;
      }
    }
    container->keys.push_back(key);
    container->items.push_back(value);
    return;
  }
  unsupported("item assignment to a " + container->describe());
}

bool contains(TraceContext& ctx, const ValuePtr& item, const ValuePtr& container) {
  if (container->is(TracedValue::Kind::NewObject)) {
    // The class's own __contains__ (collections.abc.Sequence's iterates).
    if (ValuePtr found = call_dunder(ctx, container, "__contains__", {item})) {
      return truthiness(found);
    }
    unsupported("'in' on a " + container->describe());
  }
  if (container->is_tensor() || item->is_tensor()) {
    unsupported("'in' with a tensor (data-dependent)");
  }
  if (container->is(TracedValue::Kind::NewObject)) {
    if (ValuePtr found = call_dunder(ctx, container, "__contains__", {item})) {
      return truthiness(found);
    }
    unsupported("'in' on a " + container->describe());
  }
  PyRef needle = concrete_object(item);
  if (!needle) unsupported("'in' with a " + item->describe());
  auto equal = [&](const ValuePtr& c) {
    PyRef o = concrete_object(c);
    if (!o) {
      if (c->is_tensor()) return false;  // a tensor never equals a constant here
      unsupported("'in' over a container with abstract items");
    }
    if (o.get() == needle.get()) return true;
    int eq = PyObject_RichCompareBool(o.get(), needle.get(), Py_EQ);
    if (eq < 0) unsupported_from_python_error("'in'");
    return eq == 1;
  };
  if (container->is(TracedValue::Kind::Iterator)) {
    // Items are taken up to the first equal one, as eager does: a generator runs no further.
    while (ValuePtr c = next_item(ctx, container)) {
      if (equal(c)) return true;
    }
    return false;
  }
  const std::vector<ValuePtr>* candidates = nullptr;
  std::vector<ValuePtr> view_items;
  if (container->is(TracedValue::Kind::DictView)) {
    view_items = container->view_items();
    candidates = &view_items;
  }
  if (container->is(TracedValue::Kind::Dict)) candidates = &container->keys;
  if (container->is_sequence()) candidates = &container->items;
  if (candidates != nullptr) {
    for (const auto& c : *candidates) {
      if (equal(c)) return true;
    }
    return false;
  }
  if (container->is(TracedValue::Kind::Object) && container->source &&
      !is_module(container->py())) {
    PyRef name = PyRef::steal(PyUnicode_InternFromString("__contains__"));
    PyObject* own = _PyType_Lookup(Py_TYPE(container->py()), name.get());  // borrowed
    if (own != nullptr && own == known().mapping_contains.get()) {
      // collections.abc.Mapping's: `self[key]` found, or a KeyError.
      ctx.guard(TraceContext::GuardKind::TypeMatch, container->source, container->py());
      try {
        subscript(ctx, container, item);
        return true;
      } catch (Unsupported& stop) {
        if (!raises(stop, PyExc_KeyError)) throw;
        return false;
      }
    }
    if (ValuePtr found = call_dunder(ctx, container, "__contains__", {item})) {
      return truthiness(found);
    }
  }
  PyRef hay = concrete_object(container);
  if (!hay) unsupported("'in' on a " + container->describe());
  int r = PySequence_Contains(hay.get(), needle.get());
  if (r < 0) unsupported_from_python_error("'in'");
  return r == 1;
}

namespace {

// iter(obj) for an instance of a Python class (made by the trace, or with a source): its
// class's own __iter__, traced; collections.abc.Sequence's as the loop it is, self[i] until
// an IndexError; a dict subclass's inherited one over its modelled keys. Null when the class
// has no Python __iter__ and no dict base.
std::unique_ptr<std::vector<ValuePtr>> iterate_instance(TraceContext& ctx, const ValuePtr& value) {
  bool made_here = value->is(TracedValue::Kind::NewObject);
  PyObject* type =
      made_here ? value->class_value->py() : reinterpret_cast<PyObject*>(Py_TYPE(value->py()));
  PyRef name = PyRef::steal(PyUnicode_InternFromString("__iter__"));
  PyObject* own = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), name.get());  // borrowed
  if (own == nullptr) return nullptr;
  bool builtin_mapping_iter = made_here && value->mapping_items && !PyFunction_Check(own);
  if (!PyFunction_Check(own) && !builtin_mapping_iter) return nullptr;
  auto items = std::make_unique<std::vector<ValuePtr>>();
  if (own == known().sequence_iter.get()) {
    if (value->is(TracedValue::Kind::Object)) {
      ctx.guard(TraceContext::GuardKind::TypeMatch, value->source, value->py());
    }
    for (long long i = 0;; ++i) {
      if (i > 100000) unsupported("iterating a very long sequence");
      try {
        items->push_back(
            subscript(ctx, value, TracedValue::constant(PyRef::steal(PyLong_FromLongLong(i)))));
      } catch (Unsupported& stop) {
        if (!stop.exception ||
            !PyErr_GivenExceptionMatches(stop.exception.get(), PyExc_IndexError)) {
          throw;
        }
        return items;
      }
    }
  }
  ValuePtr it = call_dunder(ctx, value, "__iter__", {});
  if (!it) return nullptr;
  if (!it->is(TracedValue::Kind::Iterator)) {
    unsupported("__iter__ of a " + value->describe() + " returned a " + it->describe());
  }
  *items = iterate(ctx, it);
  return items;
}

// The iterator a class's own __iter__, written in Python, returns for an instance the trace
// made (often a
// generator, stepped as it is consumed); null when iterating it goes another way.
ValuePtr own_iterator(TraceContext& ctx, const ValuePtr& value) {
  if (!value->is(TracedValue::Kind::NewObject)) return nullptr;
  PyObject* type = value->class_value->py();
  PyRef name = PyRef::steal(PyUnicode_InternFromString("__iter__"));
  PyObject* own = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), name.get());  // borrowed
  if (own == nullptr || !PyFunction_Check(own) || own == known().sequence_iter.get()) {
    return nullptr;
  }
  ValuePtr it = call_dunder(ctx, value, "__iter__", {});
  if (it && !it->is(TracedValue::Kind::Iterator)) {
    unsupported("__iter__ of a " + value->describe() + " returned a " + it->describe());
  }
  return it;
}

}  // namespace

ValuePtr iterator_of(TraceContext& ctx, const ValuePtr& value) {
  if (value->is(TracedValue::Kind::Iterator)) return value;
  if (ValuePtr own = own_iterator(ctx, value)) return own;
  return TracedValue::iterator(iterate(ctx, value));
}

std::vector<ValuePtr> iterate(TraceContext& ctx, const ValuePtr& value) {
  switch (value->kind) {
    case TracedValue::Kind::Tuple:
    case TracedValue::Kind::List:
      return value->items;
    case TracedValue::Kind::Dict:
      return value->keys;
    case TracedValue::Kind::DictView:
      return value->view_items();
    case TracedValue::Kind::NewObject: {
      if (auto items = iterate_instance(ctx, value)) return std::move(*items);
      ValuePtr len = call_dunder(ctx, value, "__len__", {});
      if (!len || !len->is_constant()) unsupported("iterating a " + value->describe());
      std::vector<ValuePtr> items;
      long long n = PyLong_AsLongLong(len->py());
      for (long long i = 0; i < n; ++i) {
        items.push_back(
            subscript(ctx, value, TracedValue::constant(PyRef::steal(PyLong_FromLongLong(i)))));
      }
      return items;
    }
    case TracedValue::Kind::Iterator:
      return drain_iterator(ctx, value, false);  // consumed, as iterating it consumes it
    case TracedValue::Kind::Tensor: {
      PyRef n = PyRef::steal(PyObject_CallMethod(value->py(), "size", "i", 0));
      if (!n) unsupported_from_python_error("iterating a 0-d tensor");
      long long count = PyLong_AsLongLong(n.get());
      std::vector<ValuePtr> items;
      for (long long i = 0; i < count; ++i) {
        items.push_back(
            subscript(ctx, value, TracedValue::constant(PyRef::steal(PyLong_FromLongLong(i)))));
      }
      return items;
    }
    case TracedValue::Kind::Object:
      if (is_module(value->py())) {
        const KnownObjects& k = known();
        if (is_module_container(value->py(), k.module_dict_type)) {
          std::vector<ValuePtr> keys;
          for (auto& child : module_children(ctx, value)) {
            keys.push_back(TracedValue::constant(
                PyRef::steal(PyUnicode_FromString(child->source->name().c_str()))));
          }
          return keys;
        }
        if (is_module_container(value->py(), k.sequential_type) ||
            is_module_container(value->py(), k.module_list_type)) {
          return module_children(ctx, value);
        }
      } else if (value->source && !PyType_Check(value->py()) && !PyModule_Check(value->py())) {
        if (auto items = iterate_instance(ctx, value)) return std::move(*items);
      }
      unsupported("iterating a " + value->describe());
    case TracedValue::Kind::Constant:
    case TracedValue::Kind::Range: {
      if (value->source && PyAnySet_Check(value->py())) {
        // Its guard compares elements, not the order they were inserted in.
        unsupported("iterating a set the trace did not make");
      }
      PyRef it = PyRef::steal(PyObject_GetIter(value->py()));
      if (!it) unsupported_from_python_error("iter()");
      std::vector<ValuePtr> items;
      while (PyObject* next = PyIter_Next(it.get())) {
        items.push_back(TracedValue::constant(PyRef::steal(next)));
        if (items.size() > 100000) unsupported("iterating a very long constant");
      }
      if (PyErr_Occurred()) unsupported_from_python_error("iteration");
      return items;
    }
    default:
      unsupported("iterating a " + value->describe());
  }
}

std::vector<ValuePtr> unpack_items(TraceContext& ctx, const ValuePtr& value) {
  if (value->is(TracedValue::Kind::Iterator)) return drain_iterator(ctx, value, true);
  return iterate(ctx, value);
}

}  // namespace dynvm::vm
