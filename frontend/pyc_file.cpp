// .pyc files: header parsing, magic numbers of Python 3.6 to 3.13, and unmarshalling of
// the module code object.
#include "dynvm/frontend/pyc_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "dynvm/frontend/marshal_reader.h"
#include "dynvm/frontend/opcode.h"

namespace dynvm::frontend {
namespace {

// Magic numbers of each 3.x series from its first alpha to its final release
// (importlib/_bootstrap_external.py lists them); only `final_magic` is a release's.
struct MagicRange {
  int minor;
  uint16_t first_magic;
  uint16_t final_magic;
};
constexpr MagicRange kMagicRanges[] = {
    {6, 3360, 3379},  {7, 3390, 3394},  {8, 3400, 3413},  {9, 3420, 3425},
    {10, 3430, 3439}, {11, 3450, 3495}, {12, 3500, 3531}, {13, 3550, 3571},
};
constexpr uint16_t kFirstMagicOfPython3 = 3000;
constexpr uint16_t kFirstMagicAfter313 = 3600;
constexpr uint16_t kLastMagicOfPython3 = 3999;  // 3.14 and later continue upwards

// Files bigger than this are not .pyc files anyone compiled.
constexpr std::streamoff kMaxPycFileSize = std::streamoff{1} << 30;

uint32_t read_le32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 4; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

}  // namespace

Expected<PythonVersion> python_version_from_magic(uint16_t magic_number) {
  const std::string number = std::to_string(magic_number);
  for (const MagicRange& range : kMagicRanges) {
    if (magic_number == range.final_magic) return PythonVersion{3, range.minor};
    if (magic_number >= range.first_magic && magic_number < range.final_magic) {
      return make_error("magic number " + number + " is from a pre-release of Python 3." +
                        std::to_string(range.minor) + " (the release uses " +
                        std::to_string(range.final_magic) + "): unsupported Python version");
    }
  }
  if (magic_number >= kFirstMagicOfPython3 && magic_number < kMagicRanges[0].first_magic) {
    return make_error("magic number " + number +
                      " is from Python 3.5 or older: unsupported Python version");
  }
  if (magic_number >= kFirstMagicAfter313 && magic_number <= kLastMagicOfPython3) {
    return make_error("magic number " + number +
                      " is from Python 3.14 or newer: unsupported Python version");
  }
  return make_error("unknown magic number " + number + ": not a .pyc file of Python 3");
}

Expected<PycHeader> read_pyc_header(std::string_view bytes) {
  if (bytes.size() < 4) {
    return make_error("truncated .pyc file: " + std::to_string(bytes.size()) +
                      " bytes, the header alone has 16");
  }
  PycHeader header;
  header.magic_number = static_cast<uint16_t>(static_cast<unsigned char>(bytes[0]) |
                                              (static_cast<unsigned char>(bytes[1]) << 8));
  if (bytes[2] != '\r' || bytes[3] != '\n') {
    return make_error("bad magic number: a .pyc file starts with two bytes and \"\\r\\n\"");
  }
  Expected<PythonVersion> version = python_version_from_magic(header.magic_number);
  if (!version) return version.error();
  header.version = *version;

  // Before PEP 552 (3.7) the header had no flags word: magic, mtime, size.
  const bool has_flags = header.version.minor >= 7;
  const size_t size = has_flags ? PycHeader::kSize : 12;
  if (bytes.size() < size) {
    return make_error("truncated .pyc file: " + std::to_string(bytes.size()) +
                      " bytes, the header alone has " + std::to_string(size));
  }
  if (!has_flags) {
    header.source_mtime = read_le32(bytes, 4);
    header.source_size = read_le32(bytes, 8);
    return header;
  }
  header.flags = read_le32(bytes, 4);
  if ((header.flags & ~(PycHeader::kFlagHashBased | PycHeader::kFlagCheckSource)) != 0) {
    return make_error("invalid .pyc flags " + std::to_string(header.flags) +
                      " (only bits 0 and 1 are defined)");
  }
  if (header.hash_based()) {
    header.source_hash = read_le32(bytes, 8) | (uint64_t{read_le32(bytes, 12)} << 32);
  } else {
    header.source_mtime = read_le32(bytes, 8);
    header.source_size = read_le32(bytes, 12);
  }
  return header;
}

Expected<PycFile> read_pyc_bytes(std::string_view bytes) {
  Expected<PycHeader> header = read_pyc_header(bytes);
  if (!header) return header.error();
  if (!is_supported_version(header->version)) {
    return make_error("unsupported Python version " + header->version.to_string() +
                      " (magic number " + std::to_string(header->magic_number) +
                      "): dynvm reads .pyc files of Python 3.11, 3.12 and 3.13");
  }
  MarshalReadOptions options;
  options.version = header->version;
  options.offset_base = PycHeader::kSize;
  Expected<RawCodePtr> code = read_marshal_code(bytes.substr(PycHeader::kSize), options);
  if (!code) return code.error();
  return PycFile{*header, std::move(*code)};
}

Expected<PycFile> read_pyc_file(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) return make_error(path + ": is a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file) return make_error(path + ": cannot open: " + std::strerror(errno));
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  if (size < 0) return make_error(path + ": cannot determine the file size");
  if (size > kMaxPycFileSize) {
    return make_error(path + ": " + std::to_string(size) + " bytes is too large for a .pyc file");
  }
  file.seekg(0, std::ios::beg);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!file.read(bytes.data(), size)) return make_error(path + ": read error");
  Expected<PycFile> pyc = read_pyc_bytes(bytes);
  if (!pyc) return make_error(path + ": " + pyc.error().message);
  return pyc;
}

}  // namespace dynvm::frontend
