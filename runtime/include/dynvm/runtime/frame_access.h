// frame_access: the one place that reads and writes CPython's interpreter frames
// (_PyInterpreterFrame, 3.11 to 3.13) and installs the PEP 523 frame hook. Everything
// else in the runtime goes through these functions.
#pragma once

#include <Python.h>

extern "C" {
struct _PyInterpreterFrame;
}

namespace dynvm::runtime::frame {

using Frame = struct _PyInterpreterFrame;
using EvalFrameFunction = PyObject* (*)(PyThreadState*, Frame*, int);

// Installs `hook` as the interpreter's frame evaluator (nullptr: CPython's own again).
void set_eval_frame_hook(EvalFrameFunction hook);
// The frame evaluator installed now (nullptr: CPython's own).
EvalFrameFunction eval_frame_hook();
// CPython's own evaluator: runs `frame` from the instruction after its prev_instr.
PyObject* eval_default(PyThreadState* ts, Frame* frame, int throwflag);

PyObject* function(Frame* f);  // borrowed PyFunctionObject, or nullptr
PyObject* code(Frame* f);      // borrowed PyCodeObject
PyObject* globals(Frame* f);   // borrowed
PyObject* builtins(Frame* f);  // borrowed
// The frame has not executed an instruction yet, belongs to the thread (not to a
// generator or frame object) and is not a class body or module (it has fast locals).
bool is_fresh_function_frame(Frame* f);

int local_count(Frame* f);        // localsplus slots (co_nlocalsplus)
PyObject** locals(Frame* f);      // localsplus
int stack_depth(Frame* f);        // values on the value stack
PyObject** stack_base(Frame* f);  // its bottom

// Replaces local `index` with `value` (a reference is stolen; nullptr unbinds).
void set_local(Frame* f, int index, PyObject* value);
// Pushes `value` (stolen) / pops the top (a new reference for the caller).
void push(Frame* f, PyObject* value);
PyObject* pop(Frame* f);

// Positions the frame so that eval_default executes the instruction at byte `offset`
// next; or so that eval_default with throwflag=1 raises the pending exception as if the
// instruction at `offset` had raised it (the frame's handlers for it run).
void set_next_instruction(Frame* f, int offset);
void set_raising_instruction(Frame* f, int offset);

// While alive, the frame is the thread's current Python frame, positioned at the
// instruction at byte `offset`: what callees see through sys._getframe(), tracebacks and
// logging while the runtime calls them on the frame's behalf.
class LinkedFrame {
 public:
  LinkedFrame(PyThreadState* ts, Frame* f, int offset);
  ~LinkedFrame();
  LinkedFrame(const LinkedFrame&) = delete;
  LinkedFrame& operator=(const LinkedFrame&) = delete;

 private:
  PyThreadState* ts_;
  Frame* frame_;
};

// sys.settrace / sys.setprofile or a debugger is active on this thread.
bool tracing_active(PyThreadState* ts);

}  // namespace dynvm::runtime::frame
