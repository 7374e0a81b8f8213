// .pyc files: headers of every kind, magic numbers of 3.6 to 3.13, real files of 3.11,
// 3.12 and 3.13, and broken files.
#include <filesystem>
#include <string>

#include "catch.h"
#include "dynvm/frontend/marshal_reader.h"
#include "dynvm/frontend/pyc_file.h"
#include "frontend/raw_code_text.h"

using dynvm::frontend::MarshalReadOptions;
using dynvm::frontend::PycFile;
using dynvm::frontend::PycHeader;
using dynvm::frontend::python_version_from_magic;
using dynvm::frontend::PythonVersion;
using dynvm::frontend::read_marshal_code;
using dynvm::frontend::read_pyc_bytes;
using dynvm::frontend::read_pyc_file;
using dynvm::frontend::read_pyc_header;
using namespace dynvm::frontend::testing;

namespace {

std::string le32(uint32_t value) {
  std::string out;
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

std::string magic(uint16_t number) {
  return std::string{static_cast<char>(number & 0xFF), static_cast<char>(number >> 8), '\r', '\n'};
}

// A timestamp-based header followed by `body`.
std::string pyc(uint16_t number, const std::string& body, uint32_t flags = 0) {
  return magic(number) + le32(flags) + le32(1700000000) + le32(1234) + body;
}

std::string error_of(const std::string& bytes) {
  auto result = read_pyc_bytes(bytes);
  return result ? "<no error>" : result.error().message;
}

size_t count_code_objects(const dynvm::frontend::RawCode& code) {
  size_t count = 1;
  for (const auto& constant : code.consts) {
    if (constant->kind == dynvm::frontend::Constant::Kind::Code) {
      count += count_code_objects(*constant->code);
    }
  }
  return count;
}

}  // namespace

TEST_CASE("pyc: timestamp and hash-based files of 3.11, 3.12 and 3.13") {
  const std::pair<int, uint16_t> releases[] = {{11, 3495}, {12, 3531}, {13, 3571}};
  for (const auto& [minor, magic_number] : releases) {
    const std::string dir = "py3" + std::to_string(minor);
    INFO(dir);
    const PythonVersion version{3, minor};

    auto timestamp = read_pyc_file(fixture_path("marshal/" + dir + "/module.pyc"));
    INFO((timestamp ? std::string("ok") : timestamp.error().message));
    REQUIRE(timestamp.ok());
    const PycHeader& header = timestamp->header;
    CHECK(header.magic_number == magic_number);
    CHECK(header.version == version);
    CHECK(header.flags == 0);
    CHECK_FALSE(header.hash_based());
    CHECK(header.source_mtime == 1700000000);
    CHECK(header.source_size > 0);
    CHECK(timestamp->code->qualname == "<module>");
    CHECK(timestamp->code->version == version);

    auto hashed = read_pyc_file(fixture_path("marshal/" + dir + "/module_hash.pyc"));
    REQUIRE(hashed.ok());
    CHECK(hashed->header.hash_based());
    CHECK(hashed->header.check_source());
    CHECK(hashed->header.source_hash != 0);
    CHECK(hashed->header.source_mtime == 0);

    // The module is the one of functions.marshal.
    MarshalReadOptions options;
    options.version = version;
    auto reference = read_marshal_code(
        read_binary_file(fixture_path("marshal/" + dir + "/functions.marshal")), options);
    REQUIRE(reference.ok());
    CHECK(describe_code(*timestamp->code) == describe_code(**reference));
    CHECK(describe_code(*hashed->code) == describe_code(**reference));
  }
}

TEST_CASE("pyc: CPython 3.12's and 3.13's compiled standard library modules") {
  for (int minor : {12, 13}) {
    const std::filesystem::path dir = fixture_path("py3" + std::to_string(minor) + "/pyc");
    INFO(dir.string());
    REQUIRE(std::filesystem::is_directory(dir));
    size_t files = 0;
    size_t code_objects = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".pyc") continue;
      ++files;
      auto result = read_pyc_file(entry.path().string());
      INFO(entry.path().filename().string()
           << ": " << (result ? std::string("ok") : result.error().message));
      REQUIRE(result.ok());
      CHECK(result->header.version == PythonVersion{3, minor});
      CHECK(result->header.hash_based());
      CHECK(result->code->version == PythonVersion{3, minor});
      CHECK(result->code->qualname == "<module>");
      code_objects += count_code_objects(*result->code);
    }
    CHECK(files >= 40);
    CHECK(code_objects > 10 * files);
  }
}

TEST_CASE("pyc: magic numbers name their Python") {
  const std::pair<uint16_t, int> finals[] = {{3379, 6},  {3394, 7},  {3413, 8},  {3425, 9},
                                             {3439, 10}, {3495, 11}, {3531, 12}, {3571, 13}};
  for (const auto& [number, minor] : finals) {
    auto version = python_version_from_magic(number);
    REQUIRE(version.ok());
    CHECK(*version == PythonVersion{3, minor});
  }
  CHECK(python_version_from_magic(3494).error().message ==
        "magic number 3494 is from a pre-release of Python 3.11 (the release uses 3495): "
        "unsupported Python version");
  CHECK(python_version_from_magic(3351).error().message ==
        "magic number 3351 is from Python 3.5 or older: unsupported Python version");
  CHECK(python_version_from_magic(3627).error().message ==
        "magic number 3627 is from Python 3.14 or newer: unsupported Python version");
  CHECK(python_version_from_magic(62211).error().message ==
        "unknown magic number 62211: not a .pyc file of Python 3");
}

TEST_CASE("pyc: other Python versions are refused by name") {
  CHECK(error_of(pyc(3439, "N")) ==
        "unsupported Python version 3.10 (magic number 3439): dynvm reads .pyc files of Python "
        "3.11, 3.12 and 3.13");
  // 3.13's magic number reaches the marshal reader.
  CHECK(error_of(pyc(3571, "N")) ==
        "bad marshal data at offset 16: expected a code object, found None");
  CHECK(error_of(pyc(3570, "N")) ==
        "magic number 3570 is from a pre-release of Python 3.13 (the release uses 3571): "
        "unsupported Python version");
  // 3.6 headers have no flags word: magic, mtime, size.
  const std::string py36 = magic(3379) + le32(1700000000) + le32(99);
  auto header = read_pyc_header(py36);
  REQUIRE(header.ok());
  CHECK(header->version == PythonVersion{3, 6});
  CHECK(header->source_size == 99);
  CHECK(error_of(py36 + "N").rfind("unsupported Python version 3.6 ", 0) == 0);
  CHECK(error_of(pyc(3520, "N")) ==
        "magic number 3520 is from a pre-release of Python 3.12 (the release uses 3531): "
        "unsupported Python version");
}

TEST_CASE("pyc: broken files") {
  CHECK(error_of("") == "truncated .pyc file: 0 bytes, the header alone has 16");
  CHECK(error_of(magic(3495) + std::string(2, '\0')) ==
        "truncated .pyc file: 6 bytes, the header alone has 16");
  CHECK(error_of("\xa7\x0d\x0a\x0a") ==
        "bad magic number: a .pyc file starts with two bytes and \"\\r\\n\"");
  CHECK(error_of("PK\x03\x04 not a pyc file") ==
        "bad magic number: a .pyc file starts with two bytes and \"\\r\\n\"");
  CHECK(error_of(pyc(3495, "N", 4)) == "invalid .pyc flags 4 (only bits 0 and 1 are defined)");
  CHECK(error_of(pyc(3495, "")) ==
        "bad marshal data at offset 16: truncated data: the type code of an object needs 1 "
        "byte, 0 left");
  CHECK(error_of(pyc(3531, "N")) ==
        "bad marshal data at offset 16: expected a code object, found None");
  // Offsets in errors are offsets in the file.
  CHECK(error_of(pyc(3495, ")\x02N^")) ==
        "bad marshal data at offset 19: unknown type code 0x5e '^'");

  auto missing = read_pyc_file("no/such/file.pyc");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "no/such/file.pyc: cannot open: No such file or directory");
  CHECK(read_pyc_file(fixture_path("marshal")).error().message ==
        fixture_path("marshal") + ": is a directory");

  // Truncating a real file anywhere gives an error, never a crash.
  const std::string real = read_binary_file(fixture_path("marshal/py312/module.pyc"));
  REQUIRE(real.size() > 100);
  for (size_t length = 0; length < real.size(); length += 7) {
    CHECK_FALSE(read_pyc_bytes(std::string_view(real).substr(0, length)).ok());
  }
}
