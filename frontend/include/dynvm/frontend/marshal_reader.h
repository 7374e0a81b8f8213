// dynvm's own reader of CPython's marshal format (version 4, as 3.11 to 3.13 write it).
//
// It turns marshalled code objects and constants into RawCode/Constant without a
// Python interpreter, and treats its input as untrusted: malformed data gives an
// Error naming what is wrong and the byte offset, never a crash, a hang or an
// allocation out of proportion to the input: declared sizes are checked against the
// bytes left before anything is allocated, nesting is limited, and the objects built
// take at most about 60 bytes per input byte (plus a bounded amount of copying).
#pragma once

#include <cstddef>
#include <string_view>

#include "dynvm/frontend/raw_code.h"
#include "dynvm/support/expected.h"

namespace dynvm::frontend {

struct MarshalReadOptions {
  // The Python that wrote the data (marshal data does not say). Stored in every
  // RawCode::version; code objects are accepted only for 3.11 to 3.13, whose code
  // object layout this reader knows.
  PythonVersion version{3, 11};
  // Added to the byte offsets that error messages give, e.g. 16 when the data
  // follows a .pyc header, so that offsets are offsets in the file.
  size_t offset_base = 0;
  // Objects nested deeper than this are rejected, as CPython's marshal does.
  int max_depth = 2000;
};

// Reads one object from the start of `data`; bytes after it are ignored, as
// marshal.loads() does. Supported: None, Ellipsis, StopIteration, bools, ints of any
// size, floats, complex numbers, str, bytes, tuples, frozensets and code objects,
// with back-references. Lists, dicts and sets never occur in code objects and are
// rejected with an error saying so.
Expected<ConstantPtr> read_marshal_object(std::string_view data,
                                          const MarshalReadOptions& options = {});

// Like read_marshal_object, but the object must be a code object.
Expected<RawCodePtr> read_marshal_code(std::string_view data,
                                       const MarshalReadOptions& options = {});

}  // namespace dynvm::frontend
