// trace_frame: runs the VM over a frame (from its beginning or from where a graph break
// left it) and packages the trace; at a break, traces again to stop right before it.
#include <deque>
#include <utility>

#include "dynvm/vm/opcode_coverage.h"
#include "dynvm/vm/trace.h"
#include "inline_frame.h"
#include "known_objects.h"
#include "python_values.h"
#include "trace_context.h"

namespace dynvm::vm {

namespace {

// One run of the VM over the frame, stopping at `stop` when it is set.
struct Attempt {
  Trace trace;
  int root_instruction = -1;  // at a break: the traced frame's instruction
  int root_arrival = 0;
  bool live_iterators = false;  // the trace read a live list or tuple iterator
};

std::vector<int> free_slots(const frontend::CodeInfo& code) {
  std::vector<int> slots;
  for (int32_t slot : code.freevars) slots.push_back(static_cast<int>(slot));
  return slots;
}

// The frame's initial locals and stack as traced values.
std::vector<ValuePtr> start_frame(TraceContext& ctx, const FrameStart& start,
                                  const frontend::CodeInfo& code, PyFunctionObject* f,
                                  InlineFrame& frame) {
  std::vector<ValuePtr> stack;
  if (start.start == 0) {
    size_t nargs = static_cast<size_t>(code.total_argcount());
    if (start.locals.size() != nargs) unsupported("internal: wrong number of bound arguments");
    for (size_t i = 0; i < nargs; ++i) {
      const std::string& name = code.localsplus[i].name;
      frame.locals[i] = ctx.wrap(start.locals[i], Source::local(name, static_cast<int>(i)));
    }
    if (f->func_closure != nullptr) {
      for (size_t i = 0; i < code.freevars.size(); ++i) {
        PyObject* cell = PyTuple_GET_ITEM(f->func_closure, static_cast<Py_ssize_t>(i));
        PyObject* contents = PyCell_GET(cell);  // borrowed
        const std::string& name = code.localsplus[static_cast<size_t>(code.freevars[i])].name;
        ValuePtr v = contents == nullptr
                         ? TracedValue::null()
                         : ctx.wrap(contents, Source::closure(name, static_cast<int>(i)));
        ValuePtr c = TracedValue::cell(v);
        c->mutable_here = false;
        frame.locals[static_cast<size_t>(code.freevars[i])] = c;
      }
    }
    return stack;
  }
  if (start.locals.size() != code.localsplus.size()) {
    unsupported("internal: wrong number of frame locals");
  }
  // Locals are wrapped when first read (InlineFrame::local); the stack now.
  for (auto& slot : frame.locals) slot = nullptr;
  for (size_t i = 0; i < start.stack.size(); ++i) {
    PyObject* o = start.stack[i];
    stack.push_back(o == nullptr ? TracedValue::null()
                                 : ctx.wrap(o, Source::stack(static_cast<int>(i))));
  }
  return stack;
}

// Dynamic shapes: the graph's symbols and the guards on them (TorchBridge::finish_symbolic);
// when they cannot be written, the trace says so and the runtime traces with fixed sizes.
void finish_symbolic(TraceContext& ctx, Trace& trace) {
  try {
    ctx.bridge->finish_symbolic(ctx.guards);
  } catch (const Unsupported& u) {
    trace.symbolic_failure = u.reason;
  }
}

Attempt attempt(const FrameStart& start, const TraceOptions& options, InlineFrame::StopPoint stop) {
  Attempt out;
  Trace& trace = out.trace;
  trace.start = start.start;
  ErrorStash stash;  // an error pending on entry is kept; the trace leaves none
  std::unique_ptr<TraceContext> context;
  try {
    PyObject* function = start.function;
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
    ctx.guards.add_autocast();  // what ops compute depends on it (and torch.autocast blocks)
    ctx.bridge->set_initial_grad_mode(ctx.grad_enabled);
    trace.grad_enabled_at_start = ctx.grad_enabled;

    auto code = ctx.code_info(f->func_code);
    if (code->is_generator() || code->is_coroutine() || code->is_async_generator()) {
      unsupported("generators and coroutines are not traced");
    }
    if (start.start < 0 || start.start >= static_cast<int>(code->instructions.size())) {
      unsupported("internal: a trace starting outside the code");
    }
    GlobalsScope scope{ctx.root_globals, ctx.builtins, nullptr};
    InlineFrame frame(ctx, code, PyRef::borrow(f->func_code), scope);
    std::vector<ValuePtr> stack = start_frame(ctx, start, *code, f, frame);
    frame.make_root(start.start, std::move(stack), stop,
                    start.start == 0 ? std::vector<PyObject*>{} : start.locals);
    ValuePtr result = frame.run();
    if (frame.stopped()) {
      ResumePoint resume;
      resume.resume_index = stop.instruction;
      resume.grad_enabled = ctx.grad_enabled;
      ctx.bridge->resume_recipes(frame.locals, frame.value_stack(), free_slots(*code),
                                 ctx.side_effects, &trace.side_effects, &resume);
      trace.resume = std::move(resume);
    } else {
      trace.output = ctx.bridge->output_recipe(result, ctx.side_effects, &trace.side_effects);
    }
    trace.grad_enabled_at_exit = ctx.grad_enabled;
    finish_symbolic(ctx, trace);
    trace.graph = std::move(ctx.bridge->graph());
    trace.inputs = std::move(ctx.bridge->inputs());
    trace.guards = std::move(ctx.guards);
    out.live_iterators = ctx.read_live_iterator;
  } catch (const Unsupported& u) {
    if (u.opcode >= 0) count_break(static_cast<frontend::Opcode>(u.opcode), u.reason, u.refused);
    trace.graph_break = GraphBreakInfo{u.reason, u.filename, u.lineno};
    trace.resume.reset();
    trace.side_effects.clear();
    out.root_instruction = u.root_instruction;
    out.root_arrival = u.root_arrival;
    if (context) finish_symbolic(*context, trace);
    if (context) trace.guards = std::move(context->guards);  // the path that led to it
    if (context) out.live_iterators = context->read_live_iterator;
  }
  PyErr_Clear();
  return out;
}

}  // namespace

Trace trace_frame(const FrameStart& start, const TraceOptions& options) {
  Attempt first = attempt(start, options, {});
  if (first.trace.graph_break && first.live_iterators && !options.opaque_live_iterators) {
    // A trace resumed inside a loop (its iterator left on the stack) breaks again: guarded
    // on what the iterator has left, it would make one variant per iteration; the
    // iterator stays opaque instead, and the variant of each resume point serves them all.
    TraceOptions opaque = options;
    opaque.opaque_live_iterators = true;
    return trace_frame(start, opaque);
  }
  if (!first.trace.graph_break || first.root_instruction < 0) return std::move(first.trace);
  // Trace again, stopping before the instruction of the traced frame that broke (for a
  // call, before the instructions that prepare it), so the graph holds only what comes
  // before it and the frame state there can be rebuilt. Where it cannot be, a value the
  // frame holds there may name an earlier instruction to stop at instead (a generator
  // suspended in a loop whose body breaks: the instruction that made it).
  auto* f = reinterpret_cast<PyFunctionObject*>(start.function);
  auto code = decoded_code(f->func_code);
  if (!code) return std::move(first.trace);
  std::deque<Attempt> failed;  // attempts that stopped earlier and still broke
  const Attempt* broke = &first;
  for (int tries = 0; tries < 3; ++tries) {
    int resume_index = broke->root_instruction;
    int r = code->instructions[static_cast<size_t>(broke->root_instruction)].norm.resume_index;
    if (r >= 0) resume_index = r;
    Attempt next = attempt(start, options, {resume_index, broke->root_arrival});
    if (next.trace.resume) {
      // What made the call break (the inlined code's path to it: an optimizer's state dict
      // still empty on the first step, a branch on a module flag) is part of the variant:
      // when it changes, the call is traced again instead of breaking for good.
      if (!next.trace.guards.merge(first.trace.guards)) return std::move(first.trace);
      for (const Attempt& a : failed) {
        if (!next.trace.guards.merge(a.trace.guards)) return std::move(first.trace);
      }
      next.trace.graph_break = broke->trace.graph_break;
      if (next.trace.symbolic_failure.empty()) {
        next.trace.symbolic_failure = broke->trace.symbolic_failure;
      }
      next.trace.resume->instruction = broke->root_instruction;
      return std::move(next.trace);
    }
    // The state there cannot be rebuilt (or the VM changed its mind): unless an earlier
    // instruction is named, the frame runs eagerly from where this trace started.
    bool earlier =
        next.root_instruction >= 0 && (next.root_instruction != broke->root_instruction ||
                                       next.root_arrival != broke->root_arrival);
    if (!earlier) return std::move(first.trace);
    failed.push_back(std::move(next));
    broke = &failed.back();
  }
  return std::move(first.trace);
}

std::shared_ptr<const frontend::CodeInfo> decoded_code(PyObject* code) {
  try {
    return TraceContext::code_info(code);
  } catch (const Unsupported&) {
    PyErr_Clear();
    return nullptr;
  }
}

Trace trace_function(PyObject* function, const std::vector<PyObject*>& arguments,
                     const TraceOptions& options) {
  FrameStart start;
  start.function = function;
  start.locals = arguments;
  return trace_frame(start, options);
}

}  // namespace dynvm::vm
