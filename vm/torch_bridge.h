// TorchBridge: runs torch callables on fake tensors for the VM and turns the ATen
// operators they reach into graph nodes. The only part of the VM that talks to torch.
// Private to vm/.
#pragma once

#include <Python.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dynvm/graph/graph.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/trace.h"
#include "dynvm/vm/traced_value.h"
#include "trace_context.h"

namespace dynvm::vm {

using KwArgs = std::vector<std::pair<std::string, ValuePtr>>;

class TorchBridge {
 public:
  explicit TorchBridge(TraceContext& context);
  ~TorchBridge();

  // A graph input for a live tensor (borrowed) read from `source`.
  ValuePtr input_tensor(PyObject* real, const SourcePtr& source);
  // The live tensor a graph input was made for (borrowed), or null for a computed tensor.
  PyObject* real_input(const ValuePtr& tensor) const;
  // callable(*args, **kwargs) on fake tensors; the operators it reaches become nodes.
  ValuePtr call(PyObject* callable, const std::vector<ValuePtr>& args, const KwArgs& kwargs);
  // A built-in leaf nn.Module called with its parameters and buffers as graph inputs.
  ValuePtr call_module(PyObject* module, const SourcePtr& module_source,
                       const std::vector<ValuePtr>& args, const KwArgs& kwargs);

  // The real value of a tensor the trace computed from Python constants alone (small, on
  // the CPU; see dynvm._tracing.TraceSession), or null.
  PyRef folded_value(const ValuePtr& tensor);

  graph::Graph& graph() { return graph_; }
  // The grad mode the graph starts under (the caller's, guarded).
  void set_initial_grad_mode(bool enabled) { graph_grad_mode_ = enabled; }
  std::vector<InputBinding>& inputs() { return inputs_; }
  // Marks the graph outputs and returns the recipe rebuilding `value` from them.
  // The side effects get recipes for their values too (their tensors become outputs).
  OutputRecipe output_recipe(const ValuePtr& value,
                             const std::vector<TraceContext::PendingSideEffect>& pending,
                             std::vector<SideEffect>* side_effects);
  // The recipes rebuilding a frame's locals and value stack at a graph break (see
  // ResumePoint), and the side effects' values. `free_slots` are the localsplus slots of
  // the frame's free variables, in closure order. A slot whose `locals` entry is null (a
  // local never read) gets a FromSource recipe without a source: "leave it as it is".
  void resume_recipes(const std::vector<ValuePtr>& locals, const std::vector<ValuePtr>& stack,
                      const std::vector<int>& free_slots,
                      const std::vector<TraceContext::PendingSideEffect>& pending,
                      std::vector<SideEffect>* side_effects, ResumePoint* resume);
  size_t node_count() const;
  // The graph value a fake tensor (borrowed) holds now: an in-place operator on it moves
  // it to that operator's output. Null when unknown.
  graph::Value* value_for_fake(PyObject* fake);
  // Dynamic shapes, at the end of a trace: the graph's symbols and relations, the inputs'
  // symbolic TENSOR_MATCH checks and the SHAPE_RELATIONS guard. Nothing without symbols.
  void finish_symbolic(GuardSet& guards);

 private:
  class RecipeBuilder;
  PyRef to_python(const ValuePtr& value);  // fakes for tensors
  // Positional and keyword arguments as a Python tuple and dict.
  std::pair<PyRef, PyRef> python_arguments(const std::vector<ValuePtr>& args, const KwArgs& kwargs);
  ValuePtr from_python(PyObject* object);  // borrowed; maps fakes back to graph values
  void add_records(PyObject* records);     // borrowed list from the tracing session
  void sync_grad_mode();                   // a set_grad_enabled node when the mode changed
  graph::Value* mark_requires_grad(graph::Value* value);  // an aten::requires_grad_ node
  graph::TensorMeta meta_of(PyObject* fake);              // borrowed; symbolic sizes too
  // The dimensions of an input to trace symbolically (a tuple of ints), or null.
  PyRef dynamic_dims_of(PyObject* real, const SourcePtr& source) const;
  graph::Argument sym_argument(PyObject* number, const char* op);

  TraceContext& context_;
  PyRef session_;  // dynvm._tracing.TraceSession
  graph::Graph graph_;
  std::vector<InputBinding> inputs_;
  bool graph_grad_mode_ = true;
  // fake tensor -> its latest graph value; the fakes are kept alive by fakes_.
  std::unordered_map<PyObject*, graph::Value*> value_of_fake_;
  std::vector<PyRef> fakes_;
  std::unordered_map<PyObject*, ValuePtr> input_of_real_;  // real tensor -> its input
  std::vector<PyRef> reals_;
  bool symbolic_ = false;  // dynamic shapes: the session makes symbolic sizes
  std::vector<std::pair<SourcePtr, graph::Value*>> symbolic_inputs_;  // inputs, in order
};

}  // namespace dynvm::vm
