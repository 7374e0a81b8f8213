// guards_hold: the reference interpreter of a guard set, run on every call of a compiled
// variant to decide whether the variant may be reused.
#pragma once

#include <cstddef>
#include <string>

#include "dynvm/vm/guard.h"
#include "dynvm/vm/source_resolver.h"

namespace dynvm::vm {

// Why a guard set did not hold: the first failing guard and what the value was instead.
struct GuardFailure {
  size_t index = 0;    // of the guard in its set
  std::string guard;   // the guard's text
  std::string reason;  // e.g. "L['x'] dtype is float64, expected float32"
};

// "TENSOR_MATCH L['x']: ... failed: L['x'] dtype is float64, expected float32".
std::string to_string(const GuardFailure& failure);

// GIL held. True when every guard of `guards` holds for the call described by `inputs`,
// checked in insertion order. Never raises and leaves no Python error set (an error already
// pending on entry is kept). When `why` is non-null and a guard fails, *why says which and
// why (that explanation allocates and may call repr() on builtin values); with `why` null,
// sets of at most 32 sources allocate nothing. Attribute reads may run Python code: the caller
// keeps `guards` alive for the whole call.
bool guards_hold(const GuardSet& guards, const FrameInputs& inputs, GuardFailure* why = nullptr);

// GIL held. The fast check of one guard of a set on its resolved source value (borrowed;
// nullptr for the kinds that read global state): what guards_hold does per guard, for code
// that resolves sources itself (compiled guards). Never raises, allocates nothing.
// DUPLICATE_INPUT compares two sources' values, which its caller does: false here.
bool guard_check(const Guard& guard, PyObject* value);

}  // namespace dynvm::vm
