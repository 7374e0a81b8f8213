// TorchBridge: fake-tensor calls through dynvm._tracing and their records as graph nodes.
#include "torch_bridge.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "dynvm/graph/op_properties.h"
#include "dynvm/support/progress.h"
#include "known_objects.h"
#include "lazy_items.h"
#include "python_values.h"
#include "trace_context.h"
#include "user_objects.h"

namespace dynvm::vm {

namespace {

std::string str_of(PyObject* o) {  // borrowed
  PyRef s = PyRef::steal(PyObject_Str(o));
  if (!s) {
    PyErr_Clear();
    return "";
  }
  return PyUnicode_AsUTF8(s.get());
}

std::vector<int64_t> int_tuple(PyObject* o) {  // borrowed sequence of ints
  std::vector<int64_t> out;
  PyRef seq = PyRef::steal(PySequence_Fast(o, "expected a sequence"));
  if (!seq) unsupported_from_python_error("tensor metadata");
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    out.push_back(PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq.get(), i)));
  }
  return out;
}

std::optional<graph::DType> dtype_of(PyObject* dtype) {  // borrowed torch.dtype
  std::string name = str_of(dtype);
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  return graph::parse_dtype(name);
}

// The dtype, device and requires_grad of a fake tensor (borrowed); sizes left empty.
graph::TensorMeta meta_without_sizes(PyObject* fake) {
  graph::TensorMeta meta;
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(fake, "dtype"));
  PyRef device = PyRef::steal(PyObject_GetAttrString(fake, "device"));
  PyRef grad = PyRef::steal(PyObject_GetAttrString(fake, "requires_grad"));
  if (!dtype || !device || !grad) unsupported_from_python_error("tensor metadata");
  auto dt = dtype_of(dtype.get());
  if (!dt) unsupported("tensors of dtype " + str_of(dtype.get()));
  meta.dtype = *dt;
  auto dev = graph::parse_device(str_of(device.get()));
  if (!dev) unsupported("tensors on device " + str_of(device.get()));
  meta.device = *dev;
  meta.requires_grad = grad.get() == Py_True;
  return meta;
}

graph::TensorMeta meta_of_fake(PyObject* fake) {  // borrowed
  graph::TensorMeta meta = meta_without_sizes(fake);
  PyRef shape = PyRef::steal(PyObject_GetAttrString(fake, "shape"));
  PyRef stride = PyRef::steal(PyObject_CallMethod(fake, "stride", nullptr));
  if (!shape || !stride) unsupported_from_python_error("tensor metadata");
  meta.sizes = int_tuple(shape.get());
  meta.strides = int_tuple(stride.get());
  return meta;
}

// Whether an operator's tensor result is state only the graph's operators pass along: a
// tensor of a dtype the graph has no name for, or on the meta device where the operator
// ran on another (the random state of CUDA's flash and cuDNN attention, whose device
// depends on whether a CUDA graph is being captured).
bool is_opaque_result(PyObject* fake) {  // borrowed
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(fake, "dtype"));
  PyRef device = PyRef::steal(PyObject_GetAttrString(fake, "device"));
  if (!dtype || !device) unsupported_from_python_error("tensor metadata");
  return !dtype_of(dtype.get()) || str_of(device.get()) == "meta";
}

// A graph input name from a source: L['self'].conv1.weight -> self_conv1_weight.
std::string input_name_for(const std::string& source_text) {
  std::string out;
  bool skip_prefix = source_text.size() > 2 && source_text[1] == '[';
  for (size_t i = skip_prefix ? 2 : 0; i < source_text.size(); ++i) {
    char c = source_text[i];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "in_" + out;
  return out;
}

}  // namespace

TorchBridge::TorchBridge(TraceContext& context) : context_(context) {
  const KnownObjects* k = KnownObjects::get();
  if (k == nullptr) unsupported_from_python_error("importing torch and dynvm._tracing");
  symbolic_ = context.options.symbolic();
  session_ = PyRef::steal(
      PyObject_CallMethod(k->tracing.get(), "TraceSession", "O", symbolic_ ? Py_True : Py_False));
  if (!session_) unsupported_from_python_error("starting a tracing session");
}

TorchBridge::~TorchBridge() = default;

size_t TorchBridge::node_count() const { return graph_.num_nodes(); }

ValuePtr TorchBridge::input_tensor(PyObject* real, const SourcePtr& source) {
  auto it = input_of_real_.find(real);
  if (it != input_of_real_.end()) {
    // One tensor under two names is one graph input, valid only while both names give the
    // same object.
    const SourcePtr& first = it->second->source;
    if (source && first && source->to_string() != first->to_string()) {
      Expected<size_t> added = context_.guards.add_duplicate_input(source, first);
      if (!added) unsupported("cannot guard " + source->to_string() + ": " + added.error().message);
    }
    return it->second;
  }
  PyRef dims = dynamic_dims_of(real, source);
  PyRef fake = dims
                   ? PyRef::steal(PyObject_CallMethod(session_.get(), "fake_from_real", "OOs", real,
                                                      dims.get(), source->to_string().c_str()))
                   : PyRef::steal(PyObject_CallMethod(session_.get(), "fake_from_real", "O", real));
  if (!fake) unsupported_from_python_error("making a fake tensor for " + source->to_string());
  std::string base = input_name_for(source->to_string());
  std::string name = base;
  for (int n = 1; graph_.find_input(name) != nullptr; ++n) name = base + "_" + std::to_string(n);
  graph::Value* input = graph_.add_input(name, graph::ValueType::tensor(meta_of(fake.get())));
  if (symbolic_) symbolic_inputs_.emplace_back(source, input);
  inputs_.push_back(InputBinding{source, PyRef()});
  ValuePtr v = TracedValue::tensor(fake, input, source);
  v->tensor_type = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(real)));
  value_of_fake_[fake.get()] = input;
  fakes_.push_back(fake);
  input_of_real_[real] = v;
  reals_.push_back(PyRef::borrow(real));
  return v;
}

// --- dynamic shapes

namespace {
bool literal_argument(PyObject* o, graph::Argument* out);  // below
}  // namespace

PyRef TorchBridge::dynamic_dims_of(PyObject* real, const SourcePtr& source) const {
  if (!symbolic_ || !source) return PyRef();
  const TraceOptions& options = context_.options;
  std::vector<int> dims;
  if (options.all_dims_dynamic) {
    // Every dimension of the tensors the call is given (arguments and their items), as
    // torch.compile's dynamic=True: parameters and tensors read from objects' attributes
    // (a module's buffers, cached masks) keep fixed sizes.
    if (PyObject_TypeCheck(
            real, reinterpret_cast<PyTypeObject*>(KnownObjects::get()->parameter_type.get()))) {
      return PyRef();
    }
    for (const Source* s = source.get(); s != nullptr; s = s->base().get()) {
      using K = Source::Kind;
      if (s->kind() != K::Local && s->kind() != K::Stack && s->kind() != K::Key &&
          s->kind() != K::Index && s->kind() != K::DictValue) {
        return PyRef();
      }
    }
    PyRef n = PyRef::steal(PyObject_CallMethod(real, "dim", nullptr));
    long count = n ? PyLong_AsLong(n.get()) : -1;
    if (count < 0) {
      PyErr_Clear();
      return PyRef();
    }
    for (int d = 0; d < static_cast<int>(count); ++d) dims.push_back(d);
  } else {
    std::set<int> marked;
    auto it = options.dynamic_dims.find(source->to_string());
    if (it != options.dynamic_dims.end()) marked = it->second;
    if (options.marked_tensors) {
      // dynvm.mark_dynamic's marks (python/dynvm/api.py), on the tensor itself.
      PyRef marks = PyRef::steal(PyObject_GetAttrString(real, "_dynvm_dynamic_dims"));
      PyRef iterator = marks ? PyRef::steal(PyObject_GetIter(marks.get())) : PyRef();
      while (iterator) {
        PyRef item = PyRef::steal(PyIter_Next(iterator.get()));
        if (!item) break;
        long d = PyLong_AsLong(item.get());
        if (d >= 0) marked.insert(static_cast<int>(d));
      }
      PyErr_Clear();
    }
    dims.assign(marked.begin(), marked.end());
  }
  if (dims.empty()) return PyRef();
  PyRef tuple = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(dims.size())));
  for (size_t i = 0; i < dims.size(); ++i) {
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), PyLong_FromLong(dims[i]));
  }
  return tuple;
}

graph::Argument TorchBridge::sym_argument(PyObject* number, const char* op) {
  // The number the guards fix it to, or its expression's text.
  PyRef described = PyRef::steal(PyObject_CallMethod(session_.get(), "sym_argument", "O", number));
  if (!described) unsupported_from_python_error("a symbolic number");
  if (described.get() == Py_None) {
    unsupported(std::string("operator ") + op + " takes a symbolic " + Py_TYPE(number)->tp_name);
  }
  graph::Argument literal;
  if (!PyUnicode_Check(described.get())) {
    if (literal_argument(described.get(), &literal)) return literal;
    unsupported(std::string("operator ") + op + " takes a " + Py_TYPE(described.get())->tp_name);
  }
  Expected<graph::SymExpr> expr = graph::parse_sym_expr(PyUnicode_AsUTF8(described.get()));
  if (!expr) unsupported("internal: a symbolic size: " + expr.error().message);
  return graph::Argument::sym_int(std::move(*expr));
}

graph::TensorMeta TorchBridge::meta_of(PyObject* fake) {
  if (!symbolic_) return meta_of_fake(fake);
  PyRef described = PyRef::steal(PyObject_CallMethod(session_.get(), "symbolic_meta", "O", fake));
  if (!described) unsupported_from_python_error("the symbolic sizes of a tensor");
  if (described.get() == Py_None) return meta_of_fake(fake);
  // (sizes, strides) at the hints, then their expressions.
  graph::TensorMeta meta = meta_without_sizes(fake);
  meta.sizes = int_tuple(PyTuple_GET_ITEM(described.get(), 0));
  meta.strides = int_tuple(PyTuple_GET_ITEM(described.get(), 1));
  auto exprs = [&](PyObject* texts) {
    std::vector<graph::SymExpr> out;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(texts); ++i) {
      Expected<graph::SymExpr> e =
          graph::parse_sym_expr(PyUnicode_AsUTF8(PyList_GET_ITEM(texts, i)));
      if (!e) unsupported("internal: a symbolic size: " + e.error().message);
      out.push_back(std::move(*e));
    }
    return out;
  };
  meta.sym_sizes = exprs(PyTuple_GET_ITEM(described.get(), 2));
  meta.sym_strides = exprs(PyTuple_GET_ITEM(described.get(), 3));
  return meta;
}

void TorchBridge::finish_symbolic(GuardSet& guards) {
  if (!symbolic_) return;
  PyRef summary = PyRef::steal(PyObject_CallMethod(session_.get(), "symbolic_summary", nullptr));
  if (!summary) unsupported_from_python_error("dynamic shapes");
  PyObject* symbols = PyTuple_GET_ITEM(summary.get(), 0);    // [(source text, hint)]
  PyObject* relations = PyTuple_GET_ITEM(summary.get(), 1);  // [relation text]
  graph_.clear_symbols();
  ShapeRelationsPayload payload;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(symbols); ++i) {
    PyObject* item = PyList_GET_ITEM(symbols, i);
    std::string text = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 0));
    graph_.add_symbol(text, PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1)));
    payload.symbol_sources.push_back(std::move(text));
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(relations); ++i) {
    Expected<graph::SymRelation> r =
        graph::parse_sym_relation(PyUnicode_AsUTF8(PyList_GET_ITEM(relations, i)));
    if (!r) unsupported("internal: a relation between sizes: " + r.error().message);
    graph_.add_relation(*r);
    payload.relations.push_back(std::move(*r));
  }
  // Each input's TENSOR_MATCH checks its symbolic sizes and strides: the first occurrence of
  // a symbol binds it, later ones compare with what it was bound to.
  std::set<int32_t> bound;
  for (const auto& [source, input] : symbolic_inputs_) {
    const graph::TensorMeta* meta = input->meta();
    if (meta == nullptr || !meta->is_symbolic()) continue;
    std::vector<SymDim> dims;
    for (int stride = 0; stride < 2; ++stride) {
      const std::vector<graph::SymExpr>& exprs = stride ? meta->sym_strides : meta->sym_sizes;
      for (size_t d = 0; d < exprs.size(); ++d) {
        if (exprs[d].is_constant()) continue;
        SymDim dim;
        dim.dim = static_cast<int>(d);
        dim.stride = stride != 0;
        std::vector<int32_t> used = exprs[d].symbols();
        if (!dim.stride && used.size() == 1 && exprs[d] == graph::SymExpr::symbol(used[0]) &&
            bound.insert(used[0]).second) {
          dim.bind = used[0];
        } else {
          for (int32_t s : used) {
            if (bound.count(s) == 0) unsupported("internal: a size over a symbol not yet bound");
          }
          dim.expr = exprs[d];
        }
        dims.push_back(std::move(dim));
      }
    }
    Expected<size_t> made = guards.make_tensor_symbolic(source, std::move(dims));
    if (!made) unsupported("internal: " + made.error().message);
  }
  if (!payload.relations.empty()) guards.add_shape_relations(std::move(payload));
}

PyObject* TorchBridge::real_input(const ValuePtr& tensor) const {
  for (const auto& [real, value] : input_of_real_) {
    if (value == tensor) return real;
  }
  return nullptr;
}

graph::Value* TorchBridge::value_for_fake(PyObject* fake) {
  auto it = value_of_fake_.find(fake);
  return it == value_of_fake_.end() ? nullptr : it->second;
}

PyRef TorchBridge::to_python(const ValuePtr& value) {
  switch (value->kind) {
    case TracedValue::Kind::Constant:
      if (!PyBytes_Check(value->py()) && PyObject_CheckBuffer(value->py())) {
        // An array computed while tracing: its data would be baked into the graph.
        unsupported(std::string("passing a ") + Py_TYPE(value->py())->tp_name +
                    " to a torch function");
      }
      return value->obj;
    case TracedValue::Kind::Tensor:
    case TracedValue::Kind::Range:
      return value->obj;
    case TracedValue::Kind::Object: {
      // Objects whose identity is guarded pass as they are. Any other object (a numpy
      // array, a user object) may carry data the guards do not pin: a torch function
      // reading it would bake today's data into the graph.
      PyObject* o = value->py();
      if (identity_is_enough(o)) return value->obj;
      unsupported(std::string("passing a ") + Py_TYPE(o)->tp_name + " object to a torch function");
    }
    case TracedValue::Kind::Tuple:
    case TracedValue::Kind::List: {
      PyRef list = PyRef::steal(PyList_New(static_cast<Py_ssize_t>(value->items.size())));
      for (size_t i = 0; i < value->items.size(); ++i) {
        PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i),
                        to_python(value->items[i]).release());
      }
      if (value->is(TracedValue::Kind::List)) return list;
      if (value->is_size) {
        return PyRef::steal(PyObject_CallFunctionObjArgs(KnownObjects::get()->size_type.get(),
                                                         list.get(), nullptr));
      }
      return PyRef::steal(PyList_AsTuple(list.get()));
    }
    case TracedValue::Kind::Slice: {
      PyRef a = to_python(value->items[0]), b = to_python(value->items[1]),
            c = to_python(value->items[2]);
      return PyRef::steal(PySlice_New(a.get(), b.get(), c.get()));
    }
    case TracedValue::Kind::Dict: {
      PyRef d = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < value->keys.size(); ++i) {
        PyDict_SetItem(d.get(), value->keys[i]->py(), to_python(value->items[i]).get());
      }
      if (value->dict_class() != reinterpret_cast<PyObject*>(&PyDict_Type)) {
        d = PyRef::steal(PyObject_CallOneArg(value->dict_class(), d.get()));
        if (!d) unsupported_from_python_error("rebuilding a dict subclass");
      }
      return d;
    }
    default:
      unsupported("passing a " + value->describe() + " to a torch function");
  }
}

ValuePtr TorchBridge::from_python(PyObject* object) {
  const KnownObjects* k = KnownObjects::get();
  if (is_tensor(object)) {
    graph::Value* v = value_for_fake(object);
    if (v == nullptr) {
      unsupported(
          "a tensor made outside the dispatcher (for example .data or a tensor "
          "subclass); the trace cannot follow it");
    }
    ValuePtr t = TracedValue::tensor(PyRef::borrow(object), v);
    t->tensor_type = k->tensor_type;
    return t;
  }
  if (PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(k->size_type.get()))) {
    std::vector<ValuePtr> items;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(object); ++i) {
      items.push_back(TracedValue::constant(PyRef::borrow(PyTuple_GET_ITEM(object, i))));
    }
    ValuePtr t = TracedValue::tuple(std::move(items));
    t->is_size = true;
    t->obj = PyRef::borrow(object);
    return t;
  }
  if (PyTuple_Check(object) || PyList_Check(object)) {
    std::vector<ValuePtr> items;
    PyRef seq = PyRef::steal(PySequence_Fast(object, ""));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
      items.push_back(from_python(PySequence_Fast_GET_ITEM(seq.get(), i)));
    }
    if (PyList_Check(object)) return TracedValue::list(std::move(items), true);
    ValuePtr t = TracedValue::tuple(std::move(items));
    if (!PyTuple_CheckExact(object)) t->obj = PyRef::borrow(object);  // named tuple
    return t;
  }
  if (PyDict_Check(object)) {
    std::vector<ValuePtr> keys, values;
    PyObject *dk, *dv;
    Py_ssize_t pos = 0;
    while (PyDict_Next(object, &pos, &dk, &dv)) {
      keys.push_back(TracedValue::constant(PyRef::borrow(dk)));
      values.push_back(from_python(dv));
    }
    return TracedValue::dict(std::move(keys), std::move(values), true);
  }
  if (PyCallable_Check(object) || PyModule_Check(object)) {
    return TracedValue::object(PyRef::borrow(object));
  }
  return TracedValue::constant(PyRef::borrow(object));
}

namespace {

// A literal argument of a recorded operator; tensors are handled by the caller.
bool literal_argument(PyObject* o, graph::Argument* out) {
  const KnownObjects* k = KnownObjects::get();
  if (o == Py_None) {
    *out = graph::Argument::none();
  } else if (PyBool_Check(o)) {
    *out = graph::Argument::boolean(o == Py_True);
  } else if (PyLong_Check(o)) {
    *out = graph::Argument::integer(PyLong_AsLongLong(o));
  } else if (PyFloat_Check(o)) {
    *out = graph::Argument::real(PyFloat_AsDouble(o));
  } else if (PyUnicode_Check(o)) {
    *out = graph::Argument::string(PyUnicode_AsUTF8(o));
  } else if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == k->dtype_type.get()) {
    auto dt = dtype_of(o);
    if (!dt) return false;
    *out = graph::Argument::dtype(*dt);
  } else if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == k->device_type.get()) {
    auto dev = graph::parse_device(str_of(o));
    if (!dev) return false;
    *out = graph::Argument::device(*dev);
  } else if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == k->memory_format_type.get()) {
    std::string name = str_of(o);
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    auto f = graph::parse_memory_format(name);
    if (!f) return false;
    *out = graph::Argument::memory_format(*f);
  } else if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == k->layout_type.get()) {
    std::string name = str_of(o);
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    auto l = graph::parse_layout(name);
    if (!l) return false;
    *out = graph::Argument::layout(*l);
  } else {
    return false;
  }
  return true;
}

// Matrix products and convolutions whose Meta kernels accept operands of different dtypes,
// which their CPU and CUDA kernels refuse ("mat1 and mat2 must have the same dtype"): a
// graph holding one would not raise where eager does, or not at all once its unused result
// is dropped. The call runs eagerly instead, and raises there as in eager.
const std::set<std::string_view>& same_dtype_operators() {
  static const std::set<std::string_view> ops = {"aten::mm",
                                                 "aten::addmm",
                                                 "aten::bmm",
                                                 "aten::baddbmm",
                                                 "aten::addbmm",
                                                 "aten::matmul",
                                                 "aten::linear",
                                                 "aten::mv",
                                                 "aten::addmv",
                                                 "aten::dot",
                                                 "aten::vdot",
                                                 "aten::addr",
                                                 "aten::conv1d",
                                                 "aten::conv2d",
                                                 "aten::conv3d",
                                                 "aten::convolution",
                                                 "aten::_convolution",
                                                 "aten::conv_transpose1d",
                                                 "aten::conv_transpose2d",
                                                 "aten::conv_transpose3d"};
  return ops;
}

void refuse_mixed_dtypes(const char* op, PyObject* bound) {
  std::string_view name(op);
  name = name.substr(0, name.find('.'));
  if (same_dtype_operators().count(name) == 0) return;
  int dtype = -1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(bound); ++i) {
    PyObject* value = PyTuple_GET_ITEM(PyList_GET_ITEM(bound, i), 2);
    if (!is_tensor(value)) continue;
    int here = static_cast<int>(meta_without_sizes(value).dtype);
    if (dtype >= 0 && here != dtype) {
      unsupported(std::string("operator ") + op +
                  " on tensors of different dtypes (eager's kernel refuses them)");
    }
    dtype = here;
  }
}

}  // namespace

void TorchBridge::sync_grad_mode() {
  if (context_.grad_enabled == graph_grad_mode_) return;
  graph_grad_mode_ = context_.grad_enabled;
  graph_.append(std::string(graph::kSetGradEnabledOp), {graph::Argument::boolean(graph_grad_mode_)},
                {});
}

void TorchBridge::add_records(PyObject* records) {
  if (PyList_GET_SIZE(records) > 0) sync_grad_mode();
  Py_ssize_t n = PyList_GET_SIZE(records);
  struct Noted {  // once the records are in the graph, whichever way this returns
    const graph::Graph& graph;
    ~Noted() { progress::ops_traced(graph.num_nodes()); }
  } noted{graph_};
  for (Py_ssize_t r = 0; r < n; ++r) {
    PyObject* rec = PyList_GET_ITEM(records, r);  // (name, bound, outputs)
    const char* op = PyUnicode_AsUTF8(PyTuple_GET_ITEM(rec, 0));
    if (std::strcmp(op, "aten::lift_fresh") == 0) {
      // torch.tensor(data) makes a new tensor on every call, but the graph's constant input
      // is one tensor for all calls: a view of it would let an in-place op (or a caller
      // that receives it) change the constant that later calls see.
      op = "aten::lift_fresh_copy";
    }
    PyObject* bound = PyTuple_GET_ITEM(rec, 1);    // list of (name, kwarg_only, value)
    PyObject* outputs = PyTuple_GET_ITEM(rec, 2);  // list
    refuse_mixed_dtypes(op, bound);
    std::function<graph::Argument(PyObject*)> convert = [&](PyObject* o) -> graph::Argument {
      if (is_tensor(o)) {
        graph::Value* v = value_for_fake(o);
        if (v != nullptr) return graph::Argument::value(v);
        // A real tensor the traced code made from Python data (torch.tensor([...])):
        // captured as a constant input.
        PyRef fake_attr = PyRef::steal(PyObject_GetAttrString(o, "fake_mode"));
        if (fake_attr)
          unsupported(std::string("operator ") + op + " read a tensor the trace did not make");
        PyErr_Clear();
        std::string name = "constant";
        for (int i = 1; graph_.find_input(name) != nullptr; ++i)
          name = "constant_" + std::to_string(i);
        graph::Value* input = graph_.add_input(name, graph::ValueType::tensor(meta_of(o)));
        inputs_.push_back(InputBinding{nullptr, PyRef::borrow(o)});
        value_of_fake_[o] = input;
        fakes_.push_back(PyRef::borrow(o));
        return graph::Argument::value(input);
      }
      graph::Argument a;
      if (literal_argument(o, &a)) return a;
      if (symbolic_ && KnownObjects::get()->is_symbolic_number(o)) return sym_argument(o, op);
      if (PyList_Check(o) || PyTuple_Check(o)) {
        std::vector<graph::Argument> items;
        PyRef seq = PyRef::steal(PySequence_Fast(o, ""));
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
          items.push_back(convert(PySequence_Fast_GET_ITEM(seq.get(), i)));
        }
        return graph::Argument::list(std::move(items));
      }
      unsupported(std::string("operator ") + op + " takes an argument of type " +
                  Py_TYPE(o)->tp_name);
    };
    std::vector<graph::Argument> args;
    std::vector<graph::KeywordArgument> kwargs;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(bound); ++i) {
      PyObject* item = PyList_GET_ITEM(bound, i);
      const char* arg_name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 0));
      bool kwarg_only = PyTuple_GET_ITEM(item, 1) == Py_True;
      graph::Argument a = convert(PyTuple_GET_ITEM(item, 2));
      if (kwarg_only) {
        kwargs.push_back(graph::KeywordArgument{arg_name, std::move(a)});
      } else {
        args.push_back(std::move(a));
      }
    }
    std::vector<graph::ValueType> types;
    std::vector<PyObject*> output_fakes;  // per output; nullptr where it is no tensor
    bool after_a_result = false;          // a tensor the graph knows came before
    Py_ssize_t noutputs = PyList_GET_SIZE(outputs);
    // Trailing None results (an optional output not computed, e.g. attention weights)
    // are not graph values: the node declares the tensors before them.
    while (noutputs > 0 && PyList_GET_ITEM(outputs, noutputs - 1) == Py_None) --noutputs;
    for (Py_ssize_t i = 0; i < noutputs; ++i) {
      PyObject* o = PyList_GET_ITEM(outputs, i);
      if (is_tensor(o) && !(after_a_result && is_opaque_result(o))) {
        types.push_back(graph::ValueType::tensor(meta_of(o)));  // unsupported() if unknown
        output_fakes.push_back(o);
        after_a_result = true;
      } else if (o == Py_None || is_tensor(o)) {
        // An undefined tensor among the results (CUDA's flash attention gives no
        // cumulative sequence lengths for dense inputs), or state of unknown metadata
        // (is_opaque_result) after a result the graph does know: a tensor value without
        // metadata, which only operators of the graph read.
        types.push_back(graph::ValueType::of(graph::ValueKind::Tensor));
        output_fakes.push_back(nullptr);
      } else if ((PyLong_CheckExact(o) != 0) ||
                 (symbolic_ && KnownObjects::get()->is_symbolic_number(o))) {
        // An integer result (attention's longest sequence), read by later operators of
        // the graph only: the trace itself never sees it as a Python value.
        types.push_back(graph::ValueType::of(graph::ValueKind::Int));
        output_fakes.push_back(nullptr);
      } else {
        unsupported(std::string("operator ") + op + " returns a " + Py_TYPE(o)->tp_name);
      }
    }
    graph::Node* node = graph_.append(op, std::move(args), std::move(types), std::move(kwargs));
    bool any_input_requires_grad = false;
    node->for_each_input([&](graph::Value* v) {
      if (v->meta() != nullptr && v->meta()->requires_grad) any_input_requires_grad = true;
    });
    for (size_t i = 0; i < output_fakes.size(); ++i) {
      if (output_fakes[i] == nullptr) continue;
      graph::Value* out = node->output(i);
      // A factory called with requires_grad=True: autograd marks the result after the
      // operator ran, so the dispatcher never saw it; the graph says it explicitly.
      if (out->meta() != nullptr && out->meta()->requires_grad && !any_input_requires_grad) {
        out = mark_requires_grad(out);
      }
      value_of_fake_[output_fakes[i]] = out;
      fakes_.push_back(PyRef::borrow(output_fakes[i]));
    }
  }
}

graph::Value* TorchBridge::mark_requires_grad(graph::Value* value) {
  graph::ValueType type = value->type();
  graph::Node* node =
      graph_.append("aten::requires_grad_",
                    {graph::Argument::value(value), graph::Argument::boolean(true)}, {type});
  return node->output(0);
}

std::pair<PyRef, PyRef> TorchBridge::python_arguments(const std::vector<ValuePtr>& args,
                                                      const KwArgs& kwargs) {
  PyRef py_args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    PyTuple_SET_ITEM(py_args.get(), static_cast<Py_ssize_t>(i), to_python(args[i]).release());
  }
  PyRef py_kwargs = PyRef::steal(PyDict_New());
  for (const auto& [name, value] : kwargs) {
    PyDict_SetItemString(py_kwargs.get(), name.c_str(), to_python(value).get());
  }
  return {std::move(py_args), std::move(py_kwargs)};
}

ValuePtr TorchBridge::call(PyObject* callable, const std::vector<ValuePtr>& args,
                           const KwArgs& kwargs) {
  {
    // Autograd itself is not traced: it runs eagerly on the real tensors at a break.
    PyRef name = PyRef::steal(PyObject_GetAttrString(callable, "__name__"));
    PyErr_Clear();
    std::string n = name && PyUnicode_Check(name.get()) ? str_of(name.get()) : "";
    if (n == "backward" || n == "register_hook" || n == "retain_grad" || n == "grad" ||
        n == "_record_function_enter" || n == "_record_function_enter_new") {
      unsupported("calling " + n + "() (autograd and the profiler run eagerly)");
    }
  }
  auto [py_args, py_kwargs] = python_arguments(args, kwargs);
  PyRef result = PyRef::steal(PyObject_CallMethod(session_.get(), "call", "OOOO", callable,
                                                  py_args.get(), py_kwargs.get(),
                                                  context_.grad_enabled ? Py_True : Py_False));
  if (!result) {
    std::string error = take_error_text();
    PyRef name = PyRef::steal(PyObject_GetAttrString(callable, "__name__"));
    PyErr_Clear();
    unsupported("calling " + (name ? str_of(name.get()) : std::string("torch")) + ": " + error);
  }
  add_records(PyTuple_GET_ITEM(result.get(), 1));
  ValuePtr out = from_python(PyTuple_GET_ITEM(result.get(), 0));
  if (Py_TYPE(callable) == &PyMethodDescr_Type && !args.empty() && args[0]->is_tensor()) {
    PyRef name_object = PyRef::steal(PyObject_GetAttrString(callable, "__name__"));
    PyErr_Clear();
    std::string name = name_object ? str_of(name_object.get()) : "";
    if (name == "requires_grad_") {
      // Tensor.requires_grad_() changes autograd metadata only: no operator records it.
      bool enable = true;
      if (args.size() > 1) enable = PyObject_IsTrue(args[1]->py()) == 1;
      for (const auto& [k, v] : kwargs) {
        if (k == "requires_grad") enable = PyObject_IsTrue(v->py()) == 1;
      }
      if (!enable) unsupported("requires_grad_(False) while tracing");
      // Fakes record no autograd graph, so they cannot tell a leaf that requires grad (a
      // no-op) from a computed value (torch raises): the call runs eagerly.
      const graph::Value* value = args[0]->graph_value;
      if (value == nullptr || value->meta() == nullptr || value->meta()->requires_grad) {
        unsupported("requires_grad_() on a tensor that requires grad already");
      }
      graph::Value* marked = mark_requires_grad(args[0]->graph_value);
      value_of_fake_[args[0]->py()] = marked;
      out = TracedValue::tensor(args[0]->obj, marked);
      out->tensor_type = args[0]->tensor_type;
    }
  }
  return out;
}

PyRef TorchBridge::folded_value(const ValuePtr& tensor) {
  if (!tensor->is_tensor()) return PyRef();
  PyRef value =
      PyRef::steal(PyObject_CallMethod(session_.get(), "folded_value", "O", tensor->py()));
  if (!value) unsupported_from_python_error("reading a folded tensor");
  return value.get() == Py_None ? PyRef() : value;
}

ValuePtr TorchBridge::call_module(PyObject* module, const SourcePtr& module_source,
                                  const std::vector<ValuePtr>& args, const KwArgs& kwargs) {
  // Every parameter and buffer, recursively, as a graph input with its own source.
  PyRef state = PyRef::steal(PyDict_New());
  for (const char* kind : {"named_parameters", "named_buffers"}) {
    PyRef items = PyRef::steal(PyObject_CallMethod(module, kind, nullptr));
    if (!items) unsupported_from_python_error(kind);
    PyRef list = PyRef::steal(PySequence_List(items.get()));
    if (!list) unsupported_from_python_error(kind);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
      PyObject* pair = PyList_GET_ITEM(list.get(), i);
      std::string dotted = PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 0));
      PyObject* tensor = PyTuple_GET_ITEM(pair, 1);
      SourcePtr src = Source::module_path(
          module_source, dotted,
          kind[6] == 'p' ? Source::Kind::ModuleParam : Source::Kind::ModuleBuffer);
      ValuePtr v = context_.wrap(tensor, src);
      PyDict_SetItemString(state.get(), dotted.c_str(), v->obj.get());
    }
  }
  auto [py_args, py_kwargs] = python_arguments(args, kwargs);
  PyRef result = PyRef::steal(PyObject_CallMethod(session_.get(), "call_module", "OOOOO", module,
                                                  state.get(), py_args.get(), py_kwargs.get(),
                                                  context_.grad_enabled ? Py_True : Py_False));
  if (!result) {
    unsupported_from_python_error(std::string("calling ") + Py_TYPE(module)->tp_name);
  }
  add_records(PyTuple_GET_ITEM(result.get(), 1));
  return from_python(PyTuple_GET_ITEM(result.get(), 0));
}

// Builds the recipes that rebuild traced values from the graph outputs after the graph
// runs, adding the tensors they need to the outputs. For a resume state (`for_resume`),
// objects that existed before the call come back as themselves (their mutations are
// replayed on them). In both, an object reached twice is rebuilt once.
class TorchBridge::RecipeBuilder {
 public:
  RecipeBuilder(TorchBridge& bridge, bool for_resume)
      : bridge_(bridge), outputs_(bridge.graph_.outputs()), for_resume_(for_resume) {}
  ~RecipeBuilder() { bridge_.graph_.set_outputs(outputs_); }

  OutputRecipe build(const ValuePtr& v) {
    // Recipes are built (and run) recursively: a value nested deeper than this (a linked list
    // made in a loop) is a graph break, not a stack overflow.
    if (depth_ >= kMaxDepth) {
      unsupported("a value nested deeper than " + std::to_string(kMaxDepth) +
                  " levels kept past the graph");
    }
    struct Level {
      int& depth;
      ~Level() { --depth; }
    } level{++depth_};
    // One traced object reached twice is rebuilt once (`return d, d.keys()` returns a view
    // of the very dict returned).
    if (identity_matters(v)) {
      // A set the trace made is one object however many traced values hold it (`t = s;
      // s |= {1}` leaves two): known by the object.
      const void* key = is_made_set(v) ? static_cast<const void*>(v->py()) : v.get();
      auto seen = memo_.find(key);
      if (seen != memo_.end()) {
        OutputRecipe r;
        r.kind = OutputRecipe::Kind::MemoRef;
        r.index = seen->second;
        return r;
      }
      int id = static_cast<int>(memo_.size());
      memo_.emplace(key, id);
      OutputRecipe r = build_new(v);
      r.memo = id;
      return r;
    }
    return build_new(v);
  }

  // A set the trace made (a display, set(), a set operator's result): a new object on
  // every eager call, so each rebuild copies it, where a constant would hand out one object
  // that every call shares and mutates.
  static bool is_made_set(const ValuePtr& v) {
    return v->kind == TracedValue::Kind::Constant && v->obj && !v->source &&
           PySet_CheckExact(v->py());
  }

  // The value a side effect replays: how many items a live iterator gave, the new contents
  // of a list or dict replaced in place, or the value set.
  OutputRecipe side_effect_value(const TraceContext::PendingSideEffect& effect) {
    switch (effect.kind) {
      case SideEffect::Kind::AdvanceIterator: {
        OutputRecipe r;
        r.kind = OutputRecipe::Kind::Constant;
        r.constant = PyRef::steal(PyLong_FromSize_t(effect.value->position));
        return r;
      }
      case SideEffect::Kind::ReplaceList:
      case SideEffect::Kind::ReplaceDict:
        return build_contents(effect.value);
      default:
        return build(effect.value);
    }
  }

  // The new contents of a list or dict that existed before the call (a side effect's
  // value): its items, not the container itself.
  OutputRecipe build_contents(const ValuePtr& v) {
    OutputRecipe r;
    if (v->is(TracedValue::Kind::List)) {
      r.kind = OutputRecipe::Kind::List;
      for (const auto& item : v->items) r.items.push_back(build(item));
      return r;
    }
    if (v->is(TracedValue::Kind::Dict)) {
      r.kind = OutputRecipe::Kind::Dict;
      PyRef keys = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(v->keys.size())));
      for (size_t i = 0; i < v->keys.size(); ++i) {
        PyTuple_SET_ITEM(keys.get(), static_cast<Py_ssize_t>(i), PyRef(v->keys[i]->obj).release());
        r.items.push_back(build(v->items[i]));
      }
      r.constant = keys;
      return r;
    }
    return build(v);
  }

 private:
  static bool identity_matters(const ValuePtr& v) {
    if (is_made_set(v)) return true;
    switch (v->kind) {
      case TracedValue::Kind::List:
      case TracedValue::Kind::Dict:
      case TracedValue::Kind::NewObject:
      case TracedValue::Kind::Iterator:
      case TracedValue::Kind::Cell:
      case TracedValue::Kind::DictView:
      case TracedValue::Kind::Function:
        return true;
      default:
        return false;
    }
  }

  // Instances of `type` keep all their attributes in __dict__ (no __slots__).
  static bool has_plain_instance_dict(PyTypeObject* type) {
    auto* t = reinterpret_cast<PyObject*>(type);
    return has_instance_dict(t) && !declares_slots(t);
  }

  static PyRef constant_tuple(const std::vector<ValuePtr>& keys) {
    PyRef tuple = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(keys.size())));
    for (size_t i = 0; i < keys.size(); ++i) {
      PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), PyRef(keys[i]->obj).release());
    }
    return tuple;
  }

  OutputRecipe from_source(const SourcePtr& source) {
    OutputRecipe r;
    r.kind = OutputRecipe::Kind::FromSource;
    r.source = source;
    return r;
  }

  OutputRecipe build_new(const ValuePtr& v) {
    OutputRecipe r;
    switch (v->kind) {
      case TracedValue::Kind::Tensor: {
        // A graph input handed back as it is, from an argument or a value-stack entry
        // the call started with: the caller's own object, read from that source, not a
        // graph output (an input returned from the graph would keep a graph that autograd
        // records from being one node, and a training step's graph ends at
        // loss.backward() with its arguments still live). Not from other sources: an
        // attribute or item may be rebound by the time the outputs are rebuilt.
        if (v->source && v->graph_value != nullptr && v->graph_value->is_input() &&
            (v->source->kind() == Source::Kind::Local ||
             v->source->kind() == Source::Kind::Stack)) {
          return from_source(v->source);
        }
        r.kind = OutputRecipe::Kind::GraphOutput;
        for (size_t i = 0; i < outputs_.size(); ++i) {
          if (outputs_[i] == v->graph_value) r.index = static_cast<int>(i);
        }
        if (r.index < 0) {
          r.index = static_cast<int>(outputs_.size());
          outputs_.push_back(v->graph_value);
        }
        return r;
      }
      case TracedValue::Kind::Constant:
      case TracedValue::Kind::Range:
        // A set read from a source is the caller's object, which eager code after a break
        // may mutate: never a copy the trace took.
        if (v->source && v->obj && PySet_CheckExact(v->py())) return from_source(v->source);
        r.kind = v->obj && (PyExceptionInstance_Check(v->py()) || is_made_set(v))
                     ? OutputRecipe::Kind::FreshCopy
                     : OutputRecipe::Kind::Constant;
        // A symbolic size kept past the graph is its value in this trace, guarded.
        r.constant = v->is_constant() && v->obj ? concrete_number(v->py()) : v->obj;
        return r;
      case TracedValue::Kind::Object:
        if (v->source) return from_source(v->source);
        // A module slice (module_children) is a new container on every eager call.
        if (!v->items.empty())
          unsupported("a slice of a " + v->describe() + " kept past the graph");
        r.kind = PyExceptionInstance_Check(v->py()) ? OutputRecipe::Kind::FreshCopy
                                                    : OutputRecipe::Kind::Constant;
        r.constant = v->obj;
        return r;
      case TracedValue::Kind::Tuple:
      case TracedValue::Kind::List: {
        if (v->is_size) {
          r.kind = OutputRecipe::Kind::Constant;
          r.constant = concrete_object(v);
          if (!r.constant) r.constant = bridge_.to_python(v);
          return r;
        }
        // A container that existed before the call is itself (returned, or rebuilt for a
        // resume); its mutations are replayed.
        if (v->source && v->obj) return from_source(v->source);
        r.kind =
            v->is(TracedValue::Kind::Tuple) ? OutputRecipe::Kind::Tuple : OutputRecipe::Kind::List;
        if (v->is(TracedValue::Kind::Tuple) && v->class_value) {
          r.constant = v->class_value->obj;
        } else if (v->is(TracedValue::Kind::Tuple) && v->obj && !PyTuple_CheckExact(v->obj.get())) {
          r.constant = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get())));
        }
        for (const auto& item : v->items) r.items.push_back(build(item));
        return r;
      }
      case TracedValue::Kind::NewObject: {
        r.kind = OutputRecipe::Kind::NewObject;
        auto* type = reinterpret_cast<PyTypeObject*>(v->class_value->py());
        const ValuePtr& attributes = v->instance_dict;
        PyRef names;
        if (has_plain_instance_dict(type)) {
          // The whole __dict__, so that a __dict__ the code read is the object's own.
          names = PyRef::borrow(Py_None);
          r.items.push_back(build(attributes));
        } else {
          names = constant_tuple(attributes->keys);
          for (const auto& value : attributes->items) r.items.push_back(build(value));
        }
        PyRef item_keys = PyRef::borrow(Py_None);
        if (v->mapping_items) {
          item_keys = constant_tuple(v->mapping_items->keys);
          for (const auto& value : v->mapping_items->items) r.items.push_back(build(value));
        }
        r.object_class = GuardedObject(v->class_value->py());
        r.constant = PyRef::steal(PyTuple_Pack(2, names.get(), item_keys.get()));
        return r;
      }
      case TracedValue::Kind::Dict: {
        if (v->source && v->obj) return from_source(v->source);
        if (v->function) unsupported("a defaultdict made in the trace kept past the graph");
        r.kind = OutputRecipe::Kind::Dict;
        PyRef keys = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(v->keys.size())));
        for (size_t i = 0; i < v->keys.size(); ++i) {
          PyTuple_SET_ITEM(keys.get(), static_cast<Py_ssize_t>(i),
                           PyRef(v->keys[i]->obj).release());
          r.items.push_back(build(v->items[i]));
        }
        r.constant = keys;
        if (v->dict_class() != reinterpret_cast<PyObject*>(&PyDict_Type)) {
          r.dict_type = PyRef::borrow(v->dict_class());
        }
        return r;
      }
      case TracedValue::Kind::Function: {
        // A nested function or lambda (MAKE_FUNCTION): a new function over the same code
        // and globals, its defaults and closure cells rebuilt (the frame's own cells are
        // the live ones; a cell the trace made is shared through the memo with the
        // frame's slot that holds it).
        if (v->flag) break;  // annotations were not kept
        if (!v->code_object || !v->globals) break;
        r.kind = OutputRecipe::Kind::Function;
        // The traced frame's own globals are the call's (None here): kept by the variant,
        // which lives on the code object, they would keep that code object alive.
        PyObject* globals =
            v->globals.get() == bridge_.context_.root_globals.get() ? Py_None : v->globals.get();
        r.constant = PyRef::steal(PyTuple_Pack(2, v->code_object.get(), globals));
        for (const ValuePtr& part : {v->defaults, v->kwdefaults, v->closure}) {
          if (part) {
            r.items.push_back(build(part));
          } else {
            r.items.emplace_back();
            r.items.back().kind = OutputRecipe::Kind::Constant;
            r.items.back().constant = PyRef::borrow(Py_None);
          }
        }
        return r;
      }
      case TracedValue::Kind::Cell:
        // A frame's cell variable, or one in the closure of a function rebuilt above.
        if (v->source) return from_source(v->source);  // the live frame's own cell
        r.kind = OutputRecipe::Kind::Cell;
        if (v->items.empty()) {
          r.items.emplace_back();
          r.items.back().kind = OutputRecipe::Kind::Null;
        } else {
          r.items.push_back(build(v->items[0]));
        }
        return r;
      case TracedValue::Kind::DictView:
        r.kind = OutputRecipe::Kind::DictView;
        r.constant = PyRef::steal(PyUnicode_FromString(v->view_method()));
        r.items.push_back(build(v->self_value));
        return r;
      case TracedValue::Kind::BoundMethod:
        // A method of a class (a function with a source) bound to an object: the object
        // rebuilt, then types.MethodType(function, object), as reading the attribute does.
        if (v->function && v->function->is(TracedValue::Kind::Object) && v->self_value &&
            (for_resume_ || (v->function->source && PyFunction_Check(v->function->py())))) {
          r.kind = OutputRecipe::Kind::Method;
          r.items.push_back(build(v->function));
          r.items.push_back(build(v->self_value));
          return r;
        }
        break;
      default:
        break;
    }
    if (!for_resume_) unsupported("returning a " + v->describe());
    switch (v->kind) {
      case TracedValue::Kind::Null:
        r.kind = OutputRecipe::Kind::Null;
        return r;
      case TracedValue::Kind::Iterator:
        // A live iterator is itself, moved on by its AdvanceIterator side effect.
        if (v->source && v->obj) return from_source(v->source);
        if (has_pending_user_code(v)) refuse_suspended_iterator(bridge_.context_, v);
        if (v->lazy) {
          // The rest of a lazy one over lists, made now (it runs no user code).
          size_t at = v->position;
          drain_iterator(bridge_.context_, v, true);
          v->position = at;
        }
        r.kind = OutputRecipe::Kind::Iterator;
        for (size_t i = v->position; i < v->items.size(); ++i)
          r.items.push_back(build(v->items[i]));
        return r;
      case TracedValue::Kind::GradModeExit:
        r.kind = OutputRecipe::Kind::GradModeExit;
        r.index = v->flag ? 1 : 0;
        return r;
      default:
        break;
    }
    unsupported("a graph break where the frame holds a " + v->describe() +
                ", which cannot be rebuilt");
  }

  TorchBridge& bridge_;
  std::vector<graph::Value*> outputs_;
  bool for_resume_;
  static constexpr int kMaxDepth = 200;
  int depth_ = 0;
  std::map<const void*, int> memo_;  // traced values, and the sets the trace made
};

OutputRecipe TorchBridge::output_recipe(const ValuePtr& value,
                                        const std::vector<TraceContext::PendingSideEffect>& pending,
                                        std::vector<SideEffect>* side_effects) {
  RecipeBuilder builder(*this, false);
  OutputRecipe recipe = builder.build(value);
  for (const auto& effect : pending) {
    side_effects->push_back(
        SideEffect{effect.kind, effect.target, effect.name, builder.side_effect_value(effect)});
  }
  return recipe;
}

void TorchBridge::resume_recipes(const std::vector<ValuePtr>& locals,
                                 const std::vector<ValuePtr>& stack,
                                 const std::vector<int>& free_slots,
                                 const std::vector<TraceContext::PendingSideEffect>& pending,
                                 std::vector<SideEffect>* side_effects, ResumePoint* resume) {
  RecipeBuilder builder(*this, true);
  // Side effects first: they run before the frame is rebuilt, and may create the objects
  // (kept for identity) that the frame's values then refer to.
  for (const auto& effect : pending) {
    side_effects->push_back(
        SideEffect{effect.kind, effect.target, effect.name, builder.side_effect_value(effect)});
  }
  for (size_t i = 0; i < locals.size(); ++i) {
    const ValuePtr& v = locals[i];
    auto free = std::find(free_slots.begin(), free_slots.end(), static_cast<int>(i));
    if (free != free_slots.end() && v && v->is(TracedValue::Kind::Cell) && !v->mutable_here &&
        !v->source) {
      OutputRecipe r;  // the function's own closure cell, as COPY_FREE_VARS would copy it
      r.kind = OutputRecipe::Kind::FreeCell;
      r.index = static_cast<int>(free - free_slots.begin());
      resume->locals.push_back(std::move(r));
    } else if (!v) {
      OutputRecipe r;  // FromSource without a source: the slot stays as it is
      r.kind = OutputRecipe::Kind::FromSource;
      resume->locals.push_back(std::move(r));
    } else {
      resume->locals.push_back(builder.build(v));
    }
  }
  for (const ValuePtr& v : stack) resume->stack.push_back(builder.build(v));
}

}  // namespace dynvm::vm
