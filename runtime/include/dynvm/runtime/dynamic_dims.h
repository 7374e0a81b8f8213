// Which dimensions of a frame's input tensors a trace keeps symbolic (dynamic shapes):
// those whose size changed between calls (automatic dynamic, the default), and those the
// user marked with dynvm.mark_dynamic.
#pragma once

#include <Python.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dynvm/runtime/variant.h"
#include "dynvm/vm/guard_eval.h"

namespace dynvm::runtime {

// Dimensions by the tensor's source text ("L['x']"), as vm::TraceOptions takes them.
using DynamicDims = std::map<std::string, std::set<int>>;

// GIL held. When `why` is a TENSOR_MATCH guard of `variant` that failed only because some
// sizes differ (same type, dtype, device, number of dimensions and flags), adds those
// dimensions of its source to `dims`; returns whether any was new.
bool add_changed_dims(const Variant& variant, const vm::GuardFailure& why,
                      const vm::FrameInputs& inputs, DynamicDims* dims);

// GIL held. Whether dynvm.mark_dynamic marked a tensor among `values` (borrowed, null
// allowed: the frame's locals), looking into lists, tuples, dicts and the attributes of
// plain objects (not modules) a few levels deep. The trace then reads each input tensor's
// marks itself (vm::TraceOptions::marked_tensors).
bool reaches_marked_tensor(const std::vector<PyObject*>& values);

}  // namespace dynvm::runtime
