// concrete_step: executes one instruction of a live frame on its real values, on the
// frame's behalf — what the runtime does at a graph break before tracing continues after
// the instruction (DESIGN.md, decision 2).
#pragma once

#include <Python.h>

#include "dynvm/frontend/code_info.h"
#include "dynvm/runtime/frame_access.h"

namespace dynvm::runtime {

struct StepResult {
  enum class Kind {
    Continue,    // done: execution continues at `next` (an instruction index)
    Raised,      // the instruction raised: a Python error is set, the frame is positioned
                 // at the instruction with its stack as CPython would have it
    NotHandled,  // this instruction is not one the runtime executes: CPython must
  };
  Kind kind = Kind::NotHandled;
  int next = -1;
};

// Executes instruction `index` of `code` (the frame's decoded code) on `frame`, whose
// locals and value stack are those before the instruction. Calls made by the instruction
// see the frame as the caller (sys._getframe, tracebacks, logging).
StepResult execute_instruction(PyThreadState* ts, frame::Frame* frame,
                               const frontend::CodeInfo& code, int index);

}  // namespace dynvm::runtime
