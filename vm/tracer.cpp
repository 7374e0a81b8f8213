// trace_function: runs the VM over one call of a Python function and packages the trace.
#include <utility>

#include "dynvm/vm/trace.h"
#include "inline_frame.h"
#include "known_objects.h"
#include "python_values.h"
#include "trace_context.h"

namespace dynvm::vm {

Trace trace_function(PyObject* function, const std::vector<PyObject*>& arguments,
                     const TraceOptions& options) {
  Trace trace;
  ErrorStash stash;  // an error pending on entry is kept; the trace leaves none
  std::unique_ptr<TraceContext> context;
  try {
    if (!PyFunction_Check(function)) unsupported("only Python functions can be traced");
    if (KnownObjects::get() == nullptr) unsupported_from_python_error("importing torch");
    context = std::make_unique<TraceContext>(options);
    TraceContext& ctx = *context;
    auto* f = reinterpret_cast<PyFunctionObject*>(function);
    ctx.root_globals = PyRef::borrow(f->func_globals);
    PyObject* b = PyDict_GetItemString(f->func_globals, "__builtins__");  // borrowed
    if (b != nullptr && PyModule_Check(b)) b = PyModule_GetDict(b);
    ctx.builtins = PyRef::borrow(b != nullptr ? b : PyEval_GetBuiltins());
    PyRef grad = PyRef::steal(PyObject_CallNoArgs(KnownObjects::get()->is_grad_enabled.get()));
    ctx.grad_enabled = grad.get() == Py_True;
    ctx.guard(TraceContext::GuardKind::GradMode, nullptr, grad.get());
    ctx.bridge->set_initial_grad_mode(ctx.grad_enabled);

    auto code = ctx.code_info(f->func_code);
    if (code->is_generator() || code->is_coroutine() || code->is_async_generator()) {
      unsupported("generators and coroutines are not traced");
    }
    GlobalsScope scope{ctx.root_globals, ctx.builtins, nullptr};
    InlineFrame frame(ctx, code, PyRef::borrow(f->func_code), scope);
    size_t nargs = static_cast<size_t>(code->total_argcount());
    if (arguments.size() != nargs) unsupported("internal: wrong number of bound arguments");
    for (size_t i = 0; i < nargs; ++i) {
      const std::string& name = code->localsplus[i].name;
      frame.locals[i] = ctx.wrap(arguments[i], Source::local(name, static_cast<int>(i)));
    }
    if (f->func_closure != nullptr) {
      for (size_t i = 0; i < code->freevars.size(); ++i) {
        PyObject* cell = PyTuple_GET_ITEM(f->func_closure, static_cast<Py_ssize_t>(i));
        PyObject* contents = PyCell_GET(cell);  // borrowed
        const std::string& name = code->localsplus[static_cast<size_t>(code->freevars[i])].name;
        ValuePtr v = contents == nullptr
                         ? TracedValue::null()
                         : ctx.wrap(contents, Source::closure(name, static_cast<int>(i)));
        ValuePtr c = TracedValue::cell(v);
        c->mutable_here = false;
        frame.locals[static_cast<size_t>(code->freevars[i])] = c;
      }
    }
    ValuePtr result = frame.run();
    trace.output = ctx.bridge->output_recipe(result, ctx.side_effects, &trace.side_effects);
    trace.graph = std::move(ctx.bridge->graph());
    trace.inputs = std::move(ctx.bridge->inputs());
    trace.guards = std::move(ctx.guards);
  } catch (const Unsupported& u) {
    trace.graph_break = GraphBreakInfo{u.reason, u.filename, u.lineno};
    if (context) trace.guards = std::move(context->guards);  // the path that led to it
  }
  PyErr_Clear();
  return trace;
}

}  // namespace dynvm::vm
