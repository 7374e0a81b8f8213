// concrete_step: calls, branches and loop steps executed on the live frame at a graph break.
#include "dynvm/runtime/concrete_step.h"

namespace dynvm::runtime {

using frontend::Op;

namespace {

StepResult continue_at(int next) { return StepResult{StepResult::Kind::Continue, next}; }

StepResult raised(frame::Frame* f, const frontend::Instruction& ins) {
  frame::set_raising_instruction(f, static_cast<int>(ins.offset));
  return StepResult{StepResult::Kind::Raised, -1};
}

PyObject* peek(frame::Frame* f, int n) {  // 1 = top; borrowed
  return frame::stack_base(f)[frame::stack_depth(f) - n];
}

StepResult call(PyThreadState* ts, frame::Frame* f, const frontend::CodeInfo& code, int index) {
  const frontend::Instruction& ins = code.instructions[static_cast<size_t>(index)];
  int argc = ins.norm.arg;
  // [callable or NULL, self or callable, args...]
  if (frame::stack_depth(f) < argc + 2) return StepResult{};
  PyObject** args = frame::stack_base(f) + frame::stack_depth(f) - argc;
  PyObject* lower = args[-2];
  PyObject* upper = args[-1];
  PyObject* callable = lower != nullptr ? lower : upper;
  PyObject** argv = lower != nullptr ? args - 1 : args;
  Py_ssize_t total = argc + (lower != nullptr ? 1 : 0);
  PyObject* kwnames = nullptr;
  if (ins.norm.index >= 0) {
    PyObject* consts = reinterpret_cast<PyCodeObject*>(frame::code(f))->co_consts;
    kwnames = PyTuple_GET_ITEM(consts, ins.norm.index);
  }
  Py_ssize_t positional = total - (kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject* result;
  {
    frame::LinkedFrame linked(ts, f, static_cast<int>(ins.offset));
    result = PyObject_Vectorcall(callable, argv, static_cast<size_t>(positional), kwnames);
  }
  for (int i = 0; i < argc + 2; ++i) Py_XDECREF(frame::pop(f));
  if (result == nullptr) return raised(f, ins);
  frame::push(f, result);
  return continue_at(index + 1);
}

// PopJumpIf*: pops the top and jumps when the test holds.
StepResult pop_jump(PyThreadState* ts, frame::Frame* f, const frontend::Instruction& ins,
                    int index) {
  PyObject* v = peek(f, 1);
  bool jump;
  switch (ins.norm.op) {
    case Op::PopJumpIfNone:
      jump = v == Py_None;
      break;
    case Op::PopJumpIfNotNone:
      jump = v != Py_None;
      break;
    default: {
      int truth;
      {
        frame::LinkedFrame linked(ts, f, static_cast<int>(ins.offset));
        truth = PyObject_IsTrue(v);  // a tensor's __bool__ runs here
      }
      if (truth < 0) return raised(f, ins);
      jump = (truth != 0) == (ins.norm.op == Op::PopJumpIfTrue);
    }
  }
  Py_DECREF(frame::pop(f));
  return continue_at(jump ? ins.norm.target : index + 1);
}

StepResult for_iter(PyThreadState* ts, frame::Frame* f, const frontend::Instruction& ins,
                    int index) {
  PyObject* it = peek(f, 1);
  PyObject* next;
  {
    frame::LinkedFrame linked(ts, f, static_cast<int>(ins.offset));
    next = Py_TYPE(it)->tp_iternext != nullptr ? Py_TYPE(it)->tp_iternext(it) : nullptr;
  }
  if (next == nullptr) {
    if (Py_TYPE(it)->tp_iternext == nullptr) {
      PyErr_Format(PyExc_TypeError, "'%s' object is not an iterator", Py_TYPE(it)->tp_name);
      return raised(f, ins);
    }
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_StopIteration)) return raised(f, ins);
      PyErr_Clear();
    }
    Py_DECREF(frame::pop(f));
    return continue_at(ins.norm.target);
  }
  frame::push(f, next);
  return continue_at(index + 1);
}

StepResult format_value(PyThreadState* ts, frame::Frame* f, const frontend::Instruction& ins,
                        int index) {
  bool has_spec = (ins.norm.flags & frontend::kOpFormatSpec) != 0;
  PyObject* spec = has_spec ? peek(f, 1) : nullptr;
  PyObject* value = peek(f, has_spec ? 2 : 1);
  PyObject* result;
  {
    frame::LinkedFrame linked(ts, f, static_cast<int>(ins.offset));
    PyObject* converted = nullptr;
    switch (ins.norm.arg & 3) {
      case 1:
        converted = PyObject_Str(value);
        break;
      case 2:
        converted = PyObject_Repr(value);
        break;
      case 3:
        converted = PyObject_ASCII(value);
        break;
      default:
        converted = Py_NewRef(value);
    }
    result = converted == nullptr ? nullptr : PyObject_Format(converted, spec);
    Py_XDECREF(converted);
  }
  if (result == nullptr) return raised(f, ins);
  if (has_spec) Py_DECREF(frame::pop(f));
  Py_DECREF(frame::pop(f));
  frame::push(f, result);
  return continue_at(index + 1);
}

StepResult store_deref(frame::Frame* f, const frontend::Instruction& ins, int index) {
  PyObject* cell = frame::locals(f)[ins.norm.index];
  if (cell == nullptr || !PyCell_Check(cell)) return StepResult{};
  PyObject* v = frame::pop(f);
  int rc = PyCell_Set(cell, v);  // releases the old contents
  Py_DECREF(v);
  if (rc < 0) return raised(f, ins);
  return continue_at(index + 1);
}

static_assert(static_cast<int>(frontend::CompareOp::LT) == Py_LT &&
                  static_cast<int>(frontend::CompareOp::GE) == Py_GE,
              "COMPARE_OP numbers comparisons as PyObject_RichCompare does");

PyObject* binary(int op, PyObject* a, PyObject* b) {
  switch (op) {
    case 0:
      return PyNumber_Add(a, b);
    case 1:
      return PyNumber_And(a, b);
    case 2:
      return PyNumber_FloorDivide(a, b);
    case 3:
      return PyNumber_Lshift(a, b);
    case 4:
      return PyNumber_MatrixMultiply(a, b);
    case 5:
      return PyNumber_Multiply(a, b);
    case 6:
      return PyNumber_Remainder(a, b);
    case 7:
      return PyNumber_Or(a, b);
    case 8:
      return PyNumber_Power(a, b, Py_None);
    case 9:
      return PyNumber_Rshift(a, b);
    case 10:
      return PyNumber_Subtract(a, b);
    case 11:
      return PyNumber_TrueDivide(a, b);
    case 12:
      return PyNumber_Xor(a, b);
    case 13:
      return PyNumber_InPlaceAdd(a, b);
    case 14:
      return PyNumber_InPlaceAnd(a, b);
    case 15:
      return PyNumber_InPlaceFloorDivide(a, b);
    case 16:
      return PyNumber_InPlaceLshift(a, b);
    case 17:
      return PyNumber_InPlaceMatrixMultiply(a, b);
    case 18:
      return PyNumber_InPlaceMultiply(a, b);
    case 19:
      return PyNumber_InPlaceRemainder(a, b);
    case 20:
      return PyNumber_InPlaceOr(a, b);
    case 21:
      return PyNumber_InPlacePower(a, b, Py_None);
    case 22:
      return PyNumber_InPlaceRshift(a, b);
    case 23:
      return PyNumber_InPlaceSubtract(a, b);
    case 24:
      return PyNumber_InPlaceTrueDivide(a, b);
    case 25:
      return PyNumber_InPlaceXor(a, b);
    default:
      PyErr_SetString(PyExc_SystemError, "dynvm: unknown binary operator");
      return nullptr;
  }
}

// An instruction taking the top `operands` values and pushing `compute`'s result.
template <typename Compute>
StepResult replace_top(PyThreadState* ts, frame::Frame* f, const frontend::Instruction& ins,
                       int index, int operands, Compute compute) {
  if (frame::stack_depth(f) < operands) return StepResult{};
  PyObject* result;
  {
    frame::LinkedFrame linked(ts, f, static_cast<int>(ins.offset));
    result = compute();
  }
  if (result == nullptr) return raised(f, ins);
  for (int i = 0; i < operands; ++i) Py_DECREF(frame::pop(f));
  frame::push(f, result);
  return continue_at(index + 1);
}

}  // namespace

StepResult execute_instruction(PyThreadState* ts, frame::Frame* frame,
                               const frontend::CodeInfo& code, int index) {
  if (index < 0 || index >= static_cast<int>(code.instructions.size())) return StepResult{};
  const frontend::Instruction& ins = code.instructions[static_cast<size_t>(index)];
  switch (ins.norm.op) {
    case Op::Call:
      return call(ts, frame, code, index);
    case Op::PopJumpIfFalse:
    case Op::PopJumpIfTrue:
    case Op::PopJumpIfNone:
    case Op::PopJumpIfNotNone:
      return pop_jump(ts, frame, ins, index);
    case Op::ForIter:
      return for_iter(ts, frame, ins, index);
    case Op::FormatValue:
      return format_value(ts, frame, ins, index);
    case Op::StoreDeref:
      return store_deref(frame, ins, index);
    case Op::BinaryOp:
      return replace_top(ts, frame, ins, index, 2,
                         [&] { return binary(ins.norm.arg, peek(frame, 2), peek(frame, 1)); });
    case Op::CompareOp:
      return replace_top(ts, frame, ins, index, 2, [&] {
        // CompareOp numbers the comparisons as Py_LT..Py_GE do.
        return PyObject_RichCompare(peek(frame, 2), peek(frame, 1), ins.norm.arg);
      });
    case Op::BinarySubscr:
      return replace_top(ts, frame, ins, index, 2,
                         [&] { return PyObject_GetItem(peek(frame, 2), peek(frame, 1)); });
    case Op::UnaryNegative:
      return replace_top(ts, frame, ins, index, 1,
                         [&] { return PyNumber_Negative(peek(frame, 1)); });
    case Op::UnaryInvert:
      return replace_top(ts, frame, ins, index, 1, [&] { return PyNumber_Invert(peek(frame, 1)); });
    case Op::UnaryNot:
      return replace_top(ts, frame, ins, index, 1, [&]() -> PyObject* {
        int truth = PyObject_IsTrue(peek(frame, 1));
        if (truth < 0) return nullptr;
        return Py_NewRef(truth ? Py_False : Py_True);
      });
    default:
      return StepResult{};
  }
}

}  // namespace dynvm::runtime
