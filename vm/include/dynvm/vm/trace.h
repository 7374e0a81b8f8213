// Trace: what the VM produces for one call of a function — the graph of tensor work,
// the guards under which it is valid, how graph inputs are fetched and how the return
// value is rebuilt — or the reason it could not trace the function.
#pragma once

#include <Python.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dynvm/frontend/code_info.h"
#include "dynvm/graph/graph.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/guard.h"
#include "dynvm/vm/guarded_object.h"
#include "dynvm/vm/source.h"

namespace dynvm::vm {

struct TraceOptions {
  int max_inline_depth = 32;       // nested user-function calls inlined before breaking
  int max_instructions = 2000000;  // instructions executed in one trace (loops unrolled)
  // Sources (by text, e.g. "L['step']", "S[1]") whose int or float value kept changing
  // between calls: the trace treats them as opaque objects of their type (guarded by
  // type only), so any use of their value is a graph break computed eagerly instead of
  // a constant baked into the graph.
  std::set<std::string> dynamic_sources;
  // Live list and tuple iterators (a loop's, left on the stack by a break) stay opaque
  // objects, FOR_ITER on one a break: set when a trace that read one broke again, which
  // guarded on what it had left would make one variant per iteration.
  bool opaque_live_iterators = false;
  // Dynamic shapes: the dimensions of input tensors traced with symbolic sizes, by the
  // tensor's source text ("L['x']"); with `all_dims_dynamic`, every dimension of every
  // input tensor (dynamic=True). Sizes 0 and 1 stay fixed either way.
  std::map<std::string, std::set<int>> dynamic_dims;
  bool all_dims_dynamic = false;
  // Some tensor the call is given (an argument, an item of a list, tuple or dict argument, an
  // attribute of an object argument) carries dynvm.mark_dynamic's marks: every input
  // tensor's own marks are then read, wherever the trace reaches it from.
  bool marked_tensors = false;
  bool symbolic() const { return all_dims_dynamic || marked_tensors || !dynamic_dims.empty(); }
};

// Where a graph input comes from on each call.
struct InputBinding {
  SourcePtr source;  // re-read on every call
  PyRef captured;    // or: a tensor the trace captured (a constant made in the function)
};

// How the function's return value is rebuilt from graph outputs and known values.
struct OutputRecipe {
  enum class Kind : uint8_t {
    GraphOutput,
    Constant,
    FromSource,
    Tuple,
    List,
    Dict,
    Size,
    NewObject,
    Function,  // a function the trace made: constant = (code, globals), globals None when
               // they are the traced frame's own; items = defaults, keyword defaults,
               // closure (a Tuple of cells), each a Constant None if absent
    // Kinds that only the frame state at a graph break uses (ResumePoint):
    Null,          // an unbound local, or CPython's NULL on the value stack
    Iterator,      // iter() over the rebuilt `items` (what a loop had left to visit)
    GradModeExit,  // the __exit__ of a grad-mode `with` block: restores `index` != 0
    Cell,          // a new cell holding items[0] (also in a returned Function's closure)
    FreeCell,      // the traced function's own closure cell #index
    Method,        // items[0] bound to items[1] (types.MethodType)
    MemoRef,       // the object rebuilt earlier for the recipe whose `memo` is `index`
    DictView,      // items[0]'s keys(), values() or items() (`constant` names the method)
    FreshCopy,     // copy.copy(constant) per rebuild: an exception the trace made, which
                   // every call raises as a new object (tracebacks must not pile up)
  };
  Kind kind = Kind::Constant;
  int index = -1;  // GraphOutput: which graph output; see the kinds above
  int memo = -1;   // >= 0: keep what this builds, for MemoRef (identity)
  // Constant; Dict: the keys tuple; Tuple: the type; NewObject: (attribute names or None,
  // item keys or None): with names, `items` start with one value per name (set with
  // object.__setattr__); with None, items[0] is a Dict that becomes the object's __dict__.
  // Item keys (a dict subclass) take the values after those, set through the builtin dict
  // base's own __setitem__.
  PyRef constant;
  // NewObject: the class, held weakly as the guards that name it hold it (it may be defined
  // next to the traced code, which the variant lives on); they fail once it is gone.
  GuardedObject object_class;
  PyRef dict_type;                  // Dict: the dict subclass it is (OrderedDict); null: dict
  SourcePtr source;                 // FromSource
  std::vector<OutputRecipe> items;  // Tuple, List, Dict values
};

// A mutation the traced code made to an object that existed before the call, replayed
// on the real object after the graph has run.
struct SideEffect {
  enum class Kind : uint8_t {
    SetAttr,          // setattr(target, name, value)
    ReplaceList,      // target[:] = value (a List recipe)
    ReplaceDict,      // target.clear(); target.update(value) (a Dict recipe)
    AdvanceIterator,  // next(target) value times (a Constant int): what the trace consumed
    // object.__setattr__(target, name, value): the class's own __setattr__ is not called.
    GenericSetAttr,
    // target[name] = value for an instance of a dict subclass, through its builtin base's own
    // __setitem__ (dict's or OrderedDict's), not the class's.
    BaseSetItem,
    // target[name] = value in a globals dict (STORE_GLOBAL): `target` is the dict's source, or
    // null for the traced function's own globals (FrameInputs::globals).
    SetGlobal,
    // del target[name] in a globals dict (DELETE_GLOBAL), `target` as for SetGlobal; the value
    // is None. A name already gone is left so: the trace deleted what it had set itself.
    DeleteGlobal,
    // getattr(target, name)(*args, **kwargs), value a tuple (args, kwargs) of constants: a
    // call that emits a log record, made after the graph (vm/logging_calls.cpp).
    CallMethod,
  };
  Kind kind = Kind::SetAttr;
  SourcePtr target;
  std::string name;
  OutputRecipe value;
};

struct GraphBreakInfo {
  std::string reason;
  std::string filename;
  int lineno = 0;
};

// The state of the frame where a trace stopped at a graph break: what CPython's evaluator,
// or the runtime executing that one instruction itself, needs to continue the frame.
struct ResumePoint {
  int instruction = 0;   // the instruction the VM could not trace (an index in CodeInfo)
  int resume_index = 0;  // where CPython's evaluator is entered to execute it
  std::vector<OutputRecipe> locals;  // one per localsplus slot
  std::vector<OutputRecipe> stack;   // the value stack, bottom first
  bool grad_enabled = true;          // the grad mode the frame runs under there
};

// What a trace of a frame (or of the part of it from `FrameStart::start`) ends with:
// - a return: `output` rebuilds the returned value;
// - a graph break with `resume` set: the graph runs, the side effects are replayed, the
//   frame state is rebuilt and execution continues at resume->instruction;
// - a graph break without `resume`: nothing could be traced; the frame continues
//   eagerly from where the trace started.
struct Trace {
  graph::Graph graph;
  std::vector<InputBinding> inputs;  // one per graph input, in order
  GuardSet guards;
  OutputRecipe output;
  std::vector<SideEffect> side_effects;       // in the order the traced code made them
  std::optional<GraphBreakInfo> graph_break;  // set: the trace stopped at a break
  std::optional<ResumePoint> resume;          // set: where and how the frame continues
  int start = 0;                              // the instruction the trace started at
  bool grad_enabled_at_start = true;          // the grad mode the graph starts under (guarded)
  bool grad_enabled_at_exit = true;           // the grad mode the traced code left (at the return
                                              // or the break): the runtime sets it after the graph
  // Dynamic shapes: why the guards on the symbolic sizes could not be written (a relation
  // dynvm's expressions cannot state); the runtime then traces again with fixed sizes.
  std::string symbolic_failure;
};

// Where a trace starts. At the frame's beginning (`start` 0) `locals` holds the values of
// the parameters as CPython binds them; mid-frame, after a graph break, every localsplus
// slot (nullptr when unbound; cell and free slots hold their cells) and `stack` the value
// stack (nullptr for CPython's NULL), bottom first. All borrowed.
struct FrameStart {
  PyObject* function = nullptr;  // a PyFunctionObject
  int start = 0;
  std::vector<PyObject*> locals;
  std::vector<PyObject*> stack;
};

// Traces one call of a Python function. `function` is a borrowed PyFunctionObject;
// `arguments` are borrowed references to the values of its parameters as CPython binds
// them (the first code.total_argcount() localsplus slots). Needs the GIL, and `torch`
// importable. Never raises a Python exception: unsupported code gives a Trace whose
// graph_break says why and where.
Trace trace_function(PyObject* function, const std::vector<PyObject*>& arguments,
                     const TraceOptions& options = {});

// Traces a frame from `start.start` until it returns or reaches something the VM cannot
// trace. At a break the trace is made again to stop right before the breaking instruction
// of the traced frame itself (a break inside an inlined call stops before that call), so
// that the graph holds only work that comes before it. Same contract as trace_function.
Trace trace_frame(const FrameStart& start, const TraceOptions& options = {});

// The decoded form of a live code object (borrowed), cached on the code object and freed
// with it (the shared_ptr outlives it safely); nullptr when it cannot be decoded.
std::shared_ptr<const frontend::CodeInfo> decoded_code(PyObject* code);

}  // namespace dynvm::vm
