// The tracer fuzzer's bytecode generator: turns fuzz bytes into co_code that decodes, with
// the inline caches, EXTENDED_ARG prefixes and jump offsets CPython's compiler would write,
// arguments in range of the code object's tables and operands pushed before an instruction
// would take more than the value stack holds; plus an exception table and a location table
// that fit it. What the instructions mean together is up to the bytes. No Python.h here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dynvm/frontend/raw_code.h"

namespace dynvm::fuzz {

// Reads an input front to back; past its end every byte reads as 0.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t left() const { return pos_ < size_ ? size_ - pos_ : 0; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t u16() {
    size_t low = byte();
    return low | size_t{byte()} << 8;
  }
  std::string bytes(size_t n);
  std::string rest() { return bytes(left()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// The code object the body goes into.
struct CodeShape {
  frontend::PythonVersion version;
  size_t consts = 0;  // sizes of co_consts, co_names and the localsplus slots
  size_t names = 0;
  size_t localsplus = 0;
  // Code units that stay in front of the body: the seed's instructions up to and including
  // its RESUME (MAKE_CELL, COPY_FREE_VARS, RETURN_GENERATOR, POP_TOP).
  std::string prologue;
  int firstlineno = 1;
};

struct GeneratedCode {
  std::string code;            // co_code
  std::string exceptiontable;  // co_exceptiontable
  std::string linetable;       // co_linetable
  size_t instructions = 0;     // in the body, operand pushes included
};

// Instructions from the input, two bytes each (which instruction: an index into the
// version's base opcodes; its argument), up to `max_instructions`; with `terminate`, a
// `return None` after them. With `exception_table`, the bytes left after the instructions
// become handlers (four bytes each: first and last instruction covered, handler, depth and
// lasti).
GeneratedCode generate_code(const CodeShape& shape, ByteReader& in, size_t max_instructions,
                            bool terminate, bool exception_table);

// The varint forms of the two tables, for the generator and its tests.
void append_exception_entry(std::string& table, uint32_t start, uint32_t length, uint32_t target,
                            uint32_t depth, bool lasti);
void append_line_entry(std::string& table, uint32_t units, int line_delta);

}  // namespace dynvm::fuzz
