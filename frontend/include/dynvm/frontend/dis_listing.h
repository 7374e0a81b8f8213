// Listings of decoded code in CPython's dis shapes: the text of `python -m dis` and the
// JSON `dynvm dis --json` prints, for a code object and its nested code objects.
#pragma once

#include <string>

#include "dynvm/frontend/code_info.h"

namespace dynvm::frontend {

// The text `python -m dis` prints: line numbers, offsets, ">>" at jump targets, opname,
// argument and (argrepr), an ExceptionTable section, then each nested code object
// (depth-first, as decode_recursive filled CodeInfo::nested) under "Disassembly of".
std::string format_dis_text(const CodeInfo& code);

// A JSON array with one object per code object, depth-first from `code`: qualname,
// firstlineno, instructions (offset, opname, arg, argval = dis's argrepr, line) and
// exception_table (start, end, target, depth, lasti).
std::string format_dis_json(const CodeInfo& code);

// What dis shows in parentheses after an instruction's argument ("NULL + print",
// "to 42", "+=", repr of a constant); empty where dis shows nothing.
std::string dis_argrepr(const CodeInfo& code, const Instruction& ins);

// The normalised ops, one per line ("12 [offset 24] LoadAttr index=3 (append) Method"), or
// one line saying the code has none (CodeInfo::normalized).
std::string format_normalized(const CodeInfo& code);

}  // namespace dynvm::frontend
