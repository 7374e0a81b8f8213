// frame_access: CPython 3.11 / 3.12 / 3.13 interpreter frames, behind plain functions. What
// differs between the versions is here and nowhere else:
// - the code object: f_code (3.11, 3.12), f_executable (3.13);
// - the position: prev_instr, the last instruction started (3.11, 3.12), or instr_ptr, the
//   one executing or about to begin (3.13). A fresh frame has prev_instr one unit before
//   the code, instr_ptr at its first unit;
// - the thread's current frame: ts->cframe->current_frame, or ts->current_frame (3.13).
#include "dynvm/runtime/frame_access.h"

#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>

namespace dynvm::runtime::frame {

#if PY_VERSION_HEX >= 0x030E0000
#error "dynvm's frame access supports CPython 3.11 to 3.13"
#endif

namespace {
#if PY_VERSION_HEX >= 0x030D0000
PyCodeObject* code_of(Frame* f) { return reinterpret_cast<PyCodeObject*>(f->f_executable); }
_PyInterpreterFrame*& current_frame(PyThreadState* ts) { return ts->current_frame; }
#else
PyCodeObject* code_of(Frame* f) { return f->f_code; }
_PyInterpreterFrame*& current_frame(PyThreadState* ts) { return ts->cframe->current_frame; }
#endif
_Py_CODEUNIT* first_unit(Frame* f) { return _PyCode_CODE(code_of(f)); }

// Points the frame at code unit `unit`: the one that runs next when CPython's evaluator
// resumes the frame (3.13), or the one after the last started (3.11, 3.12).
void resume_at_unit(Frame* f, int unit) {
#if PY_VERSION_HEX >= 0x030D0000
  f->instr_ptr = first_unit(f) + unit;
#else
  f->prev_instr = first_unit(f) + unit - 1;
#endif
}

// Positions the frame at the instruction at byte `offset` as the one running: its line is
// the frame's f_lineno, and f_lasti its offset.
void set_current_instruction(Frame* f, int offset) {
#if PY_VERSION_HEX >= 0x030D0000
  f->instr_ptr = first_unit(f) + offset / 2;
#else
  f->prev_instr = first_unit(f) + offset / 2;
#endif
}
}  // namespace

void set_eval_frame_hook(EvalFrameFunction hook) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(),
                                       hook != nullptr ? hook : _PyEval_EvalFrameDefault);
}

EvalFrameFunction eval_frame_hook() {
  _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
  return current == _PyEval_EvalFrameDefault ? nullptr : current;
}

PyObject* eval_default(PyThreadState* ts, Frame* frame, int throwflag) {
  return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

PyObject* function(Frame* f) {
#if PY_VERSION_HEX >= 0x030C0000
  return f->f_funcobj;
#else
  return reinterpret_cast<PyObject*>(f->f_func);
#endif
}

PyObject* code(Frame* f) { return reinterpret_cast<PyObject*>(code_of(f)); }
PyObject* globals(Frame* f) { return f->f_globals; }
PyObject* builtins(Frame* f) { return f->f_builtins; }

bool is_fresh_function_frame(Frame* f) {
  if (f->owner != FRAME_OWNED_BY_THREAD) return false;
#if PY_VERSION_HEX >= 0x030D0000
  if (f->instr_ptr != first_unit(f)) return false;
#else
  if (f->prev_instr != first_unit(f) - 1) return false;
#endif
  PyObject* fn = function(f);
  if (fn == nullptr || !PyFunction_Check(fn)) return false;
  int flags = code_of(f)->co_flags;
  return (flags & CO_OPTIMIZED) && (flags & CO_NEWLOCALS) && f->f_locals == nullptr;
}

int local_count(Frame* f) { return code_of(f)->co_nlocalsplus; }
PyObject** locals(Frame* f) { return f->localsplus; }
int stack_depth(Frame* f) { return f->stacktop - code_of(f)->co_nlocalsplus; }
PyObject** stack_base(Frame* f) { return f->localsplus + code_of(f)->co_nlocalsplus; }

void set_local(Frame* f, int index, PyObject* value) { Py_XSETREF(f->localsplus[index], value); }

void push(Frame* f, PyObject* value) { f->localsplus[f->stacktop++] = value; }

PyObject* pop(Frame* f) {
  --f->stacktop;
  PyObject* v = f->localsplus[f->stacktop];
  f->localsplus[f->stacktop] = nullptr;
  return v;
}

void set_next_instruction(Frame* f, int offset) { resume_at_unit(f, offset / 2); }

// 3.13 looks the handler up for the unit before instr_ptr, and dates the traceback entry by
// instr_ptr itself: one unit past the instruction's start is inside it for the handler, and
// its first inline cache (same position) for the traceback. An instruction without caches
// is dated by the unit after it, which may lie on the next line.
void set_raising_instruction(Frame* f, int offset) {
#if PY_VERSION_HEX >= 0x030D0000
  resume_at_unit(f, offset / 2 + 1);
#else
  set_current_instruction(f, offset);
#endif
}

LinkedFrame::LinkedFrame(PyThreadState* ts, Frame* f, int offset) : ts_(ts), frame_(f) {
  set_current_instruction(f, offset);
  f->previous = current_frame(ts);
  current_frame(ts) = f;
}

LinkedFrame::~LinkedFrame() { current_frame(ts_) = frame_->previous; }

bool tracing_active(PyThreadState* ts) {
  return ts->c_tracefunc != nullptr || ts->c_profilefunc != nullptr;
}

}  // namespace dynvm::runtime::frame
