// decode: a RawCode into the CodeInfo the VM works on.
#pragma once

#include "dynvm/frontend/code_info.h"
#include "dynvm/frontend/raw_code.h"
#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// Decodes one code object: instructions with caches skipped, specialised and instrumented
// opcodes mapped to their base, EXTENDED_ARG folded, arguments resolved and checked,
// jump targets as instruction indices, the exception and location tables, and the
// normalised ops (normalize.h). Malformed input gives an Error naming the problem and
// its byte offset; nothing in the input can make it crash, loop or allocate more than
// a small multiple of the input's size.
Expected<CodeInfo> decode(const RawCode& raw);

// decode(), and every code object among the constants, recursively, into
// CodeInfo::nested.
Expected<CodeInfo> decode_recursive(const RawCode& raw);

}  // namespace dynvm::frontend
