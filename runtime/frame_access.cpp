// frame_access: CPython 3.11 / 3.12 interpreter frames, behind plain functions.
#include "dynvm/runtime/frame_access.h"

#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>

namespace dynvm::runtime::frame {

#if PY_VERSION_HEX >= 0x030D0000
#error "dynvm's frame hook supports CPython 3.11 and 3.12"
#endif

namespace {
PyCodeObject* code_of(Frame* f) { return f->f_code; }
_Py_CODEUNIT* first_unit(Frame* f) { return _PyCode_CODE(code_of(f)); }
}  // namespace

void set_eval_frame_hook(EvalFrameFunction hook) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(),
                                       hook != nullptr ? hook : _PyEval_EvalFrameDefault);
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
  if (f->prev_instr != first_unit(f) - 1) return false;
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

void set_next_instruction(Frame* f, int offset) { f->prev_instr = first_unit(f) + offset / 2 - 1; }

void set_current_instruction(Frame* f, int offset) { f->prev_instr = first_unit(f) + offset / 2; }

LinkedFrame::LinkedFrame(PyThreadState* ts, Frame* f, int offset) : ts_(ts), frame_(f) {
  set_current_instruction(f, offset);
  f->previous = ts->cframe->current_frame;
  ts->cframe->current_frame = f;
}

LinkedFrame::~LinkedFrame() { ts_->cframe->current_frame = frame_->previous; }

bool tracing_active(PyThreadState* ts) {
  return ts->c_tracefunc != nullptr || ts->c_profilefunc != nullptr;
}

}  // namespace dynvm::runtime::frame
