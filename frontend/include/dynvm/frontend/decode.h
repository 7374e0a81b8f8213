// decode: a RawCode into the CodeInfo the VM works on.
#pragma once

#include "dynvm/frontend/code_info.h"
#include "dynvm/frontend/raw_code.h"
#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// Decodes one code object for the VM: instructions with caches skipped, specialised and
// instrumented opcodes mapped to their base, EXTENDED_ARG folded, arguments resolved and
// checked, jump targets as instruction indices, the exception and location tables, and
// the normalised ops (normalize.h). Code of a version the VM does not execute
// (is_executable_version; 3.13) is an Error saying so. Malformed input gives an Error
// naming the problem and its byte offset; nothing in the input can make it crash, loop
// or allocate more than a small multiple of the input's size.
Expected<CodeInfo> decode(const RawCode& raw);

// For listings (dynvm dis): decodes like decode(), and every code object among the
// constants, recursively, into CodeInfo::nested. It reads every version the frontend
// does; the normalised ops are filled only where the VM executes the version
// (CodeInfo::normalized).
Expected<CodeInfo> decode_recursive(const RawCode& raw);

}  // namespace dynvm::frontend
