// TracedValue: what the VM knows about one Python value while it traces a frame.
//
// A value is either abstract (a tensor known by its metadata and its graph value, a
// container of traced values) or a concrete Python object the trace treats as fixed
// (a constant, a module, a function, a class), guarded through its source.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/support/py_ref.h"
#include "dynvm/vm/source.h"

namespace dynvm::frontend {
struct CodeInfo;
}
namespace dynvm::graph {
class Value;
}

namespace dynvm::vm {

class TracedValue;
using ValuePtr = std::shared_ptr<TracedValue>;
class LazyItems;  // vm/lazy_items.h

class TracedValue {
 public:
  enum class Kind : uint8_t {
    Null,          // CPython's NULL on the value stack (before a call, unbound locals)
    Constant,      // an immutable Python value: None, bool, int, float, complex, str,
                   // bytes, Ellipsis, a dtype/device/layout/memory format, a code object
    Tensor,        // a tensor: its fake tensor and its graph value
    Tuple,         // items (a torch.Size too: see is_size)
    List,          // items; mutable when created by the trace
    Dict,          // keys (constants) and values, in insertion order; class_value set for a
                   // dict subclass the trace made (an OrderedDict)
    Slice,         // items = start, stop, step
    Range,         // a range of constants (the range object in obj)
    Iterator,      // an iterator over items from position `position`
    Object,        // a concrete object: module, class, function, builtin, nn.Module, ...
    Function,      // a function made by the trace (MAKE_FUNCTION): code, defaults, closure
    BoundMethod,   // self_value + function (a TracedValue of kind Object or Function)
    Cell,          // a cell made by the trace; items[0] is the contents (Null when empty)
    GradMode,      // torch.no_grad()/enable_grad()/set_grad_enabled(b) context manager
    GradModeExit,  // the __exit__ of a GradMode, restoring `flag`
    NoOpContext,   // a context manager whose entering and leaving change nothing the graph
                   // models: torch.autocast(...) asking for the autocast state already in
                   // force (the trace guards it), a profiler's record_function(...)
    Super,         // super() bound to (items[0] = class object, items[1] = self)
    NewObject,     // an instance of a user class made by the trace: its __dict__ in
                   // instance_dict, its class in class_value; for a subclass of dict or
                   // OrderedDict, the items it holds as a mapping in mapping_items
    Partial,       // functools.partial: function, items = bound args, kwdefaults = keywords
    DictView,      // d.keys(), d.values() or d.items() (view_of): a live view of the Dict in
                   // self_value, so it sees the dict's later mutations as Python's views do
  };
  enum class ViewOf : uint8_t { Keys, Values, Items };

  Kind kind = Kind::Null;
  SourcePtr source;  // where it came from; null for values the trace made
  PyRef obj;         // Constant/Object/Range: the object; Tensor: the fake tensor
  graph::Value* graph_value = nullptr;  // Tensor: its graph value
  PyRef tensor_type;                    // Tensor: the Python type (Tensor, Parameter, ...)
  // Tuple, List, Slice, Iterator, Cell, Super, Dict values; Object without a source: the
  // children of a slice of a ModuleList or Sequential the trace took (see module_children)
  std::vector<ValuePtr> items;
  std::vector<ValuePtr> keys;  // Dict: keys (Constant values)
  size_t position = 0;         // Iterator: next item
  // Iterator: where the items after `items` come from, made one at a time as they are asked
  // for, in eager's order (a generator the VM steps, or map/filter/enumerate/zip over one);
  // null when `items` holds them all.
  std::shared_ptr<LazyItems> lazy;
  bool is_size = false;           // Tuple: a torch.Size
  bool mutable_here = false;      // List/Dict/Cell: made by the trace, may be mutated
  bool flag = false;              // GradMode/GradModeExit: the grad mode it sets;
                                  // Function: made with annotations (not kept)
  ViewOf view_of = ViewOf::Keys;  // DictView: which view
  ValuePtr self_value;            // BoundMethod: self; DictView: the dict
  ValuePtr function;              // BoundMethod: the function; Dict: a defaultdict's factory
  // Function made by MAKE_FUNCTION.
  std::shared_ptr<const frontend::CodeInfo> code;
  PyRef code_object;    // the PyCodeObject it came from (for eager fallback and names)
  PyRef globals;        // the globals of the frame that made it
  ValuePtr defaults;    // Tuple or null
  ValuePtr kwdefaults;  // Dict or null
  ValuePtr closure;     // Tuple of Cells or null
  std::string qualname;
  // NewObject: the class (an Object with a source). Tuple: a named tuple's class.
  ValuePtr class_value;
  // NewObject: its attributes, a Dict made by the trace (what obj.__dict__ is).
  ValuePtr instance_dict;
  // NewObject of a dict or OrderedDict subclass: the contents of its builtin dict part, a Dict
  // whose class is that builtin base (what dict's own methods read and write).
  ValuePtr mapping_items;
  // Made after every value with a lower serial (a copy keeps its original's): whether a
  // container or object existed before a generator the trace runs ahead started.
  uint64_t serial = next_serial();

  // The serial the next value made will get, and a new one.
  static uint64_t peek_serial();
  static uint64_t next_serial();

  static ValuePtr null();
  static ValuePtr constant(PyRef object, SourcePtr source = nullptr);
  static ValuePtr object(PyRef object, SourcePtr source = nullptr);
  static ValuePtr tensor(PyRef fake, graph::Value* graph_value, SourcePtr source = nullptr);
  static ValuePtr tuple(std::vector<ValuePtr> items, SourcePtr source = nullptr);
  static ValuePtr list(std::vector<ValuePtr> items, bool mutable_here, SourcePtr source = nullptr);
  static ValuePtr dict(std::vector<ValuePtr> keys, std::vector<ValuePtr> values, bool mutable_here,
                       SourcePtr source = nullptr);
  static ValuePtr iterator(std::vector<ValuePtr> items);
  static ValuePtr cell(ValuePtr contents);
  static ValuePtr dict_view(ValuePtr dict, ViewOf which);
  ~TracedValue();  // frees nested values one at a time (traced_value.cpp)

  bool is(Kind k) const { return kind == k; }
  bool is_null() const { return kind == Kind::Null; }
  bool is_constant() const { return kind == Kind::Constant; }
  bool is_tensor() const { return kind == Kind::Tensor; }
  bool is_sequence() const { return kind == Kind::Tuple || kind == Kind::List; }
  // Borrowed: the Python object of a Constant or Object; nullptr otherwise.
  PyObject* py() const { return obj.get(); }

  // DictView: what the view holds now (keys, values, or (key, value) tuples).
  std::vector<ValuePtr> view_items() const;
  // DictView: "keys", "values" or "items", the dict method that makes it.
  const char* view_method() const;
  // Borrowed: the class of a Dict (dict, OrderedDict, ...).
  PyObject* dict_class() const;

  // Short description for graph-break reasons ("tensor", "list of 3", "int 4").
  std::string describe() const;
};

}  // namespace dynvm::vm
