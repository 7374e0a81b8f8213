// Constructors and descriptions of traced values.
#include "dynvm/vm/traced_value.h"

#include <utility>
#include <vector>

namespace dynvm::vm {

namespace {
uint64_t g_serial = 0;  // values are made with the GIL held
}  // namespace

uint64_t TracedValue::peek_serial() { return g_serial + 1; }
uint64_t TracedValue::next_serial() { return ++g_serial; }

// Values nest (lists of lists, an object whose attribute holds the next object: a linked list
// built in a loop), and the members' own destructors would free a chain of them recursively,
// several stack frames a level, until a deep enough chain overflowed the stack. The values
// only this one holds are moved to a worklist instead and freed here one at a time, each
// with its own such values moved out first.
TracedValue::~TracedValue() {
  std::vector<ValuePtr> pending;
  auto release = [&pending](TracedValue& v) {
    auto take = [&pending](ValuePtr& p) {
      if (p && p.use_count() == 1) pending.push_back(std::move(p));
    };
    for (ValuePtr& item : v.items) take(item);
    for (ValuePtr& key : v.keys) take(key);
    for (ValuePtr* p : {&v.self_value, &v.function, &v.defaults, &v.kwdefaults, &v.closure,
                        &v.class_value, &v.instance_dict, &v.mapping_items}) {
      take(*p);
    }
  };
  release(*this);
  while (!pending.empty()) {
    ValuePtr last = std::move(pending.back());
    pending.pop_back();
    release(*last);
  }  // `last` goes here, holding nothing that frees recursively
}

ValuePtr TracedValue::null() {
  static const ValuePtr kNull = [] {
    auto v = std::make_shared<TracedValue>();
    v->kind = Kind::Null;
    return v;
  }();
  return kNull;
}

ValuePtr TracedValue::constant(PyRef object, SourcePtr source) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Constant;
  v->obj = std::move(object);
  v->source = std::move(source);
  return v;
}

ValuePtr TracedValue::object(PyRef object, SourcePtr source) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Object;
  v->obj = std::move(object);
  v->source = std::move(source);
  return v;
}

ValuePtr TracedValue::tensor(PyRef fake, graph::Value* graph_value, SourcePtr source) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Tensor;
  v->obj = std::move(fake);
  v->graph_value = graph_value;
  v->source = std::move(source);
  return v;
}

ValuePtr TracedValue::tuple(std::vector<ValuePtr> items, SourcePtr source) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Tuple;
  v->items = std::move(items);
  v->source = std::move(source);
  return v;
}

ValuePtr TracedValue::list(std::vector<ValuePtr> items, bool mutable_here, SourcePtr source) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::List;
  v->items = std::move(items);
  v->mutable_here = mutable_here;
  v->source = std::move(source);
  return v;
}

ValuePtr TracedValue::dict(std::vector<ValuePtr> keys, std::vector<ValuePtr> values,
                           bool mutable_here, SourcePtr source) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Dict;
  v->keys = std::move(keys);
  v->items = std::move(values);
  v->mutable_here = mutable_here;
  v->source = std::move(source);
  return v;
}

ValuePtr TracedValue::iterator(std::vector<ValuePtr> items) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Iterator;
  v->items = std::move(items);
  return v;
}

ValuePtr TracedValue::cell(ValuePtr contents) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::Cell;
  v->items = {std::move(contents)};
  v->mutable_here = true;
  return v;
}

ValuePtr TracedValue::dict_view(ValuePtr dict, ViewOf which) {
  auto v = std::make_shared<TracedValue>();
  v->kind = Kind::DictView;
  v->self_value = std::move(dict);
  v->view_of = which;
  return v;
}

std::vector<ValuePtr> TracedValue::view_items() const {
  const TracedValue& d = *self_value;
  switch (view_of) {
    case ViewOf::Keys:
      return d.keys;
    case ViewOf::Values:
      return d.items;
    case ViewOf::Items:
      break;
  }
  std::vector<ValuePtr> pairs;
  for (size_t i = 0; i < d.keys.size(); ++i) pairs.push_back(tuple({d.keys[i], d.items[i]}));
  return pairs;
}

const char* TracedValue::view_method() const {
  switch (view_of) {
    case ViewOf::Keys:
      return "keys";
    case ViewOf::Values:
      return "values";
    case ViewOf::Items:
      return "items";
  }
  return "keys";
}

PyObject* TracedValue::dict_class() const {
  if (class_value) return class_value->py();
  if (obj) return reinterpret_cast<PyObject*>(Py_TYPE(obj.get()));
  return reinterpret_cast<PyObject*>(&PyDict_Type);
}

std::string TracedValue::describe() const {
  auto type_name = [](PyObject* o) -> std::string {
    return o == nullptr ? "?" : Py_TYPE(o)->tp_name;
  };
  switch (kind) {
    case Kind::Null:
      return "NULL";
    case Kind::Constant:
      return type_name(obj.get()) + " constant";
    case Kind::Tensor:
      return "tensor";
    case Kind::Tuple:
      return (is_size ? "torch.Size of " : "tuple of ") + std::to_string(items.size());
    case Kind::List:
      return "list of " + std::to_string(items.size());
    case Kind::Dict:
      return std::string(reinterpret_cast<PyTypeObject*>(dict_class())->tp_name) + " of " +
             std::to_string(keys.size());
    case Kind::DictView:
      return std::string("dict_") + view_method() + " view";
    case Kind::Slice:
      return "slice";
    case Kind::Range:
      return "range";
    case Kind::Iterator:
      return "iterator";
    case Kind::Object:
      return type_name(obj.get()) + " object";
    case Kind::Function:
      return "function " + qualname;
    case Kind::BoundMethod:
      return "bound method";
    case Kind::Cell:
      return "cell";
    case Kind::GradMode:
      return "grad-mode context manager";
    case Kind::GradModeExit:
      return "grad-mode exit";
    case Kind::NoOpContext:
      return "no-op context manager";
    case Kind::Super:
      return "super()";
    case Kind::NewObject:
      return class_value && class_value->obj
                 ? std::string(reinterpret_cast<PyTypeObject*>(class_value->obj.get())->tp_name) +
                       " object"
                 : "object";
    case Kind::Partial:
      return "functools.partial";
  }
  return "?";
}

}  // namespace dynvm::vm
