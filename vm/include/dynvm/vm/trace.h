// Trace: what the VM produces for one call of a function — the graph of tensor work,
// the guards under which it is valid, how graph inputs are fetched and how the return
// value is rebuilt — or the reason it could not trace the function.
#pragma once

#include <Python.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/guard.h"
#include "dynvm/vm/source.h"

namespace dynvm::vm {

struct TraceOptions {
  int max_inline_depth = 32;       // nested user-function calls inlined before breaking
  int max_instructions = 2000000;  // instructions executed in one trace (loops unrolled)
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
    NewObject
  };
  Kind kind = Kind::Constant;
  int index = -1;                   // GraphOutput: which graph output
  PyRef constant;                   // Constant; Dict: the keys tuple; Tuple: the type
  SourcePtr source;                 // FromSource
  std::vector<OutputRecipe> items;  // Tuple, List, Dict values
};

// A mutation the traced code made to an object that existed before the call, replayed
// on the real object after the graph has run.
struct SideEffect {
  enum class Kind : uint8_t {
    SetAttr,      // setattr(target, name, value)
    ReplaceList,  // target[:] = value (a List recipe)
    ReplaceDict,  // target.clear(); target.update(value) (a Dict recipe)
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

struct Trace {
  graph::Graph graph;
  std::vector<InputBinding> inputs;  // one per graph input, in order
  GuardSet guards;
  OutputRecipe output;
  std::vector<SideEffect> side_effects;       // in the order the traced code made them
  std::optional<GraphBreakInfo> graph_break;  // set: the function could not be traced
};

// Traces one call of a Python function. `function` is a borrowed PyFunctionObject;
// `arguments` are borrowed references to the values of its parameters as CPython binds
// them (the first code.total_argcount() localsplus slots). Needs the GIL, and `torch`
// importable. Never raises a Python exception: unsupported code gives a Trace whose
// graph_break says why and where.
Trace trace_function(PyObject* function, const std::vector<PyObject*>& arguments,
                     const TraceOptions& options = {});

}  // namespace dynvm::vm
