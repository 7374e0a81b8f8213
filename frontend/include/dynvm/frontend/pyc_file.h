// Reading .pyc files: the 16-byte header (magic number, flags, source stamp) and the
// marshalled module code object after it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dynvm/frontend/raw_code.h"
#include "dynvm/support/expected.h"

namespace dynvm::frontend {

// The header of a .pyc file of Python 3.7+ (PEP 552).
struct PycHeader {
  static constexpr size_t kSize = 16;
  static constexpr uint32_t kFlagHashBased = 0x1;    // source stamp is a hash
  static constexpr uint32_t kFlagCheckSource = 0x2;  // hash-based: importers check it

  uint16_t magic_number = 0;  // the first two bytes, little-endian; then "\r\n"
  PythonVersion version;
  uint32_t flags = 0;
  // Timestamp-based files (flags == 0): the source's mtime and size, each mod 2**32.
  uint32_t source_mtime = 0;
  uint32_t source_size = 0;
  // Hash-based files: the SipHash of the source that importlib.util.source_hash gives.
  uint64_t source_hash = 0;

  bool hash_based() const { return (flags & kFlagHashBased) != 0; }
  bool check_source() const { return (flags & kFlagCheckSource) != 0; }
};

struct PycFile {
  PycHeader header;
  RawCodePtr code;  // the module's code object
};

// The Python release whose final magic number `magic_number` is; pre-release magic
// numbers of 3.6 to 3.13 give an error naming the series ("a 3.12 pre-release").
Expected<PythonVersion> python_version_from_magic(uint16_t magic_number);

// Parses the header; fails on a short header, an unknown magic number or unknown flags.
// Any released Python 3.6+ magic number parses (3.6 has a 12-byte header; its other
// fields are left 0); only the reading of code objects needs 3.11, 3.12 or 3.13.
Expected<PycHeader> read_pyc_header(std::string_view bytes);

// A whole .pyc in memory. Fails for Pythons other than 3.11, 3.12 and 3.13 with
// "unsupported Python version 3.x".
Expected<PycFile> read_pyc_bytes(std::string_view bytes);

// Reads the file at `path`; errors start with the path.
Expected<PycFile> read_pyc_file(const std::string& path);

}  // namespace dynvm::frontend
