// copy.copy and copy.deepcopy of traced values: containers, constants and instances of plain
// user classes (a model's config) become new values the trace made, without running the copy
// module's Python code.
#pragma once

#include "dynvm/vm/traced_value.h"

namespace dynvm::vm {

class TraceContext;

// copy.deepcopy(value) (`deep`) or copy.copy(value). Unsupported for what the copy module
// would copy through code the VM does not model: tensors (deep), nn.Modules, classes with
// their own __deepcopy__, __copy__, __reduce__, __getstate__ or __setstate__, __slots__.
ValuePtr copy_value(TraceContext& ctx, const ValuePtr& value, bool deep);

}  // namespace dynvm::vm
