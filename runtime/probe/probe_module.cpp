// _dynvm_probe: the frontend's listings and the runtime's frame access, callable from
// Python without torch, so that they are tested on each Python the frontend reads (3.13
// too, where the VM does not run yet). The frame functions drive one call of a Python
// function the way the runtime drives a frame at a graph break: locals and the value
// stack rebuilt in the live frame and the frame resumed mid-way, an exception raised into
// it at an instruction, or a callee run while the frame is the thread's current frame.
#include <Python.h>

#include <functional>
#include <string>

#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/live_listing.h"
#include "dynvm/frontend/pyc_file.h"
#include "dynvm/runtime/frame_access.h"

namespace {

namespace frame = dynvm::runtime::frame;

PyObject* unicode_of(const std::string& s) {
  return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
}

// dis_json(code) -> str: the listing of a live code object and those nested in it.
PyObject* probe_dis_json(PyObject*, PyObject* code) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "dis_json() expects a code object");
    return nullptr;
  }
  auto json = dynvm::frontend::live_dis_json(reinterpret_cast<PyCodeObject*>(code));
  if (!json) {
    PyErr_SetString(PyExc_ValueError, json.error().message.c_str());
    return nullptr;
  }
  return unicode_of(*json);
}

// pyc_dis_json(path) -> str: the listing of a .pyc file, read by dynvm's marshal reader.
PyObject* probe_pyc_dis_json(PyObject*, PyObject* path) {
  const char* p = PyUnicode_AsUTF8(path);
  if (p == nullptr) return nullptr;
  auto pyc = dynvm::frontend::read_pyc_file(p);
  if (!pyc) {
    PyErr_SetString(PyExc_ValueError, pyc.error().message.c_str());
    return nullptr;
  }
  auto decoded = dynvm::frontend::decode_recursive(*pyc->code);
  if (!decoded) {
    PyErr_SetString(PyExc_ValueError, decoded.error().message.c_str());
    return nullptr;
  }
  return unicode_of(dynvm::frontend::format_dis_json(decoded.value()));
}

// What to do with the first fresh frame of `code` that the evaluator is given on this
// thread. It ends by running the frame in CPython's evaluator, which also finishes it.
struct FrameAction {
  PyObject* code = nullptr;  // borrowed
  std::function<PyObject*(PyThreadState*, frame::Frame*)> run;
  bool taken = false;
};

thread_local FrameAction* t_action = nullptr;
thread_local frame::EvalFrameFunction t_previous = nullptr;

PyObject* probe_eval_frame(PyThreadState* ts, frame::Frame* f, int throwflag) {
  FrameAction* action = t_action;
  if (action != nullptr && !action->taken && throwflag == 0 && frame::code(f) == action->code &&
      frame::is_fresh_function_frame(f)) {
    action->taken = true;
    return action->run(ts, f);
  }
  if (t_previous != nullptr) return t_previous(ts, f, throwflag);
  return frame::eval_default(ts, f, throwflag);
}

// Raises the pending exception in the frame where nothing handles it (before its first
// instruction): the frame unwinds and is finished by the evaluator.
PyObject* fail_in_frame(PyThreadState* ts, frame::Frame* f) {
  frame::set_raising_instruction(f, 0);
  return frame::eval_default(ts, f, 1);
}

// Calls function(*args) with `action` taking its frame; the hook installed before (dynvm's,
// in a process that compiles) is back afterwards and sees every other frame meanwhile.
PyObject* call_with_action(PyObject* function, PyObject* args, FrameAction& action) {
  if (!PyFunction_Check(function) || !PyTuple_Check(args)) {
    PyErr_SetString(PyExc_TypeError, "expected a Python function and a tuple of arguments");
    return nullptr;
  }
  action.code = PyFunction_GET_CODE(function);
  FrameAction* saved_action = t_action;
  frame::EvalFrameFunction saved_previous = t_previous;
  frame::EvalFrameFunction installed = frame::eval_frame_hook();
  t_action = &action;
  if (installed != probe_eval_frame) t_previous = installed;
  frame::set_eval_frame_hook(probe_eval_frame);
  PyObject* result = PyObject_Call(function, args, nullptr);
  frame::set_eval_frame_hook(installed);
  t_action = saved_action;
  t_previous = saved_previous;
  if (result != nullptr && !action.taken) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_RuntimeError, "the function's frame never reached the evaluator");
    return nullptr;
  }
  return result;
}

PyCodeObject* code_of(frame::Frame* f) { return reinterpret_cast<PyCodeObject*>(frame::code(f)); }

// An even byte offset inside the frame's code, or a ValueError.
bool valid_offset(frame::Frame* f, int offset) {
  Py_ssize_t units = Py_SIZE(code_of(f));
  if (offset < 0 || offset % 2 != 0 || offset / 2 >= units) {
    PyErr_Format(PyExc_ValueError, "offset %d is not an instruction offset of the code", offset);
    return false;
  }
  return true;
}

// run_resumed(function, args, offset, locals: dict[int, object], stack: list) -> result:
// calls function(*args), but its frame starts at the instruction at byte `offset`, with
// the plain locals at the given indices replaced and `stack` pushed on its value stack.
PyObject* probe_run_resumed(PyObject*, PyObject* a) {
  PyObject* function = nullptr;
  PyObject* args = nullptr;
  int offset = 0;
  PyObject* locals = nullptr;
  PyObject* stack = nullptr;
  if (!PyArg_ParseTuple(a, "OOiO!O!", &function, &args, &offset, &PyDict_Type, &locals,
                        &PyList_Type, &stack)) {
    return nullptr;
  }
  FrameAction action;
  action.run = [&](PyThreadState* ts, frame::Frame* f) -> PyObject* {
    if (!valid_offset(f, offset)) return fail_in_frame(ts, f);
    if (PyList_GET_SIZE(stack) > code_of(f)->co_stacksize) {
      PyErr_SetString(PyExc_ValueError, "more values than the frame's stack holds");
      return fail_in_frame(ts, f);
    }
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t position = 0;
    while (PyDict_Next(locals, &position, &key, &value)) {
      long index = PyLong_AsLong(key);
      if (index < 0 || index >= code_of(f)->co_nlocals) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_IndexError, "no plain local %ld", index);
        return fail_in_frame(ts, f);
      }
      Py_INCREF(value);
      frame::set_local(f, static_cast<int>(index), value);
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stack); ++i) {
      PyObject* v = PyList_GET_ITEM(stack, i);
      Py_INCREF(v);
      frame::push(f, v);
    }
    frame::set_next_instruction(f, offset);
    return frame::eval_default(ts, f, 0);
  };
  return call_with_action(function, args, action);
}

// run_raising(function, args, offset, exception) -> result: calls function(*args), whose
// frame raises `exception` at once as if the instruction at `offset` had raised it: the
// frame's handler for that instruction runs, or the exception leaves the call.
PyObject* probe_run_raising(PyObject*, PyObject* a) {
  PyObject* function = nullptr;
  PyObject* args = nullptr;
  int offset = 0;
  PyObject* exception = nullptr;
  if (!PyArg_ParseTuple(a, "OOiO", &function, &args, &offset, &exception)) return nullptr;
  if (!PyExceptionInstance_Check(exception)) {
    PyErr_SetString(PyExc_TypeError, "run_raising() expects an exception instance");
    return nullptr;
  }
  FrameAction action;
  action.run = [&](PyThreadState* ts, frame::Frame* f) -> PyObject* {
    if (!valid_offset(f, offset)) return fail_in_frame(ts, f);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception)), exception);
    frame::set_raising_instruction(f, offset);
    return frame::eval_default(ts, f, 1);
  };
  return call_with_action(function, args, action);
}

// call_linked(function, args, offset, callee) -> (callee's result, function's result):
// before the frame of function(*args) runs, `callee()` is called while that frame is the
// thread's current frame, positioned at the instruction at byte `offset` (what
// sys._getframe(1) and tracebacks show it); then the frame runs from its start.
PyObject* probe_call_linked(PyObject*, PyObject* a) {
  PyObject* function = nullptr;
  PyObject* args = nullptr;
  int offset = 0;
  PyObject* callee = nullptr;
  if (!PyArg_ParseTuple(a, "OOiO", &function, &args, &offset, &callee)) return nullptr;
  PyObject* seen = nullptr;
  FrameAction action;
  action.run = [&](PyThreadState* ts, frame::Frame* f) -> PyObject* {
    if (!valid_offset(f, offset)) return fail_in_frame(ts, f);
    {
      frame::LinkedFrame linked(ts, f, offset);
      seen = PyObject_CallNoArgs(callee);
    }
    if (seen == nullptr) return fail_in_frame(ts, f);
    frame::set_next_instruction(f, 0);
    return frame::eval_default(ts, f, 0);
  };
  PyObject* result = call_with_action(function, args, action);
  if (result == nullptr) {
    Py_XDECREF(seen);
    return nullptr;
  }
  return Py_BuildValue("(NN)", seen, result);
}

PyMethodDef kMethods[] = {
    {"dis_json", probe_dis_json, METH_O, "The dis listing of a live code object, as JSON."},
    {"pyc_dis_json", probe_pyc_dis_json, METH_O, "The dis listing of a .pyc file, as JSON."},
    {"run_resumed", probe_run_resumed, METH_VARARGS,
     "Call a function whose frame starts mid-way with rebuilt locals and stack."},
    {"run_raising", probe_run_raising, METH_VARARGS,
     "Call a function whose frame raises at once at a given instruction."},
    {"call_linked", probe_call_linked, METH_VARARGS,
     "Call a callee while a function's fresh frame is current, then run the function."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_dynvm_probe",
                       "dynvm's frontend listings and frame access, for tests; needs no torch.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__dynvm_probe(void) { return PyModule_Create(&kModule); }
