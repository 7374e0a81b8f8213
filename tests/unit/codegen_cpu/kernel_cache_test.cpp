// The disk cache of compiled kernels: a second compile loads the object file and runs
// LLVM not at all; keys follow the content; broken files are recompiled; DYNVM_LOGS.
#include <ATen/ATen.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "catch.h"
#include "cpu_test_util.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/codegen/kernel_disk_cache.h"

namespace dynvm::codegen {
namespace {

using testing::parse;

const char* kGroup = R"(
graph(%x: f32[16, 33] cpu, %y: f32[33] cpu):
  %0: f32[16, 33] cpu = aten::mul.Tensor(%x, %y)
  %1: f32[16, 33] cpu = aten::erf(%0)
  return (%1)
)";

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/dynvm_cache_XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_CASE("kernel cache: a second compile loads from disk and compiles nothing",
          "[codegen_cpu][kernel_cache]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  graph::Graph group = parse(kGroup);
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  options.use_memory_cache = false;  // as a new process would

  auto first = CpuKernel::compile(group, options);
  REQUIRE(first);
  CHECK((*first)->compilation().compiled);
  CHECK(!(*first)->cache_hit());
  std::string key = (*first)->compilation().cache_key;
  CHECK(std::filesystem::exists(dir.path() + "/" + key + ".o"));

  int64_t before = cpu_jit_compilation_count();
  auto second = CpuKernel::compile(group, options);
  REQUIRE(second);
  CHECK(cpu_jit_compilation_count() == before);
  CHECK(!(*second)->compilation().compiled);
  CHECK((*second)->compilation().from_disk);
  CHECK((*second)->compilation().cache_key == key);

  at::Tensor x = at::randn({16, 33});
  at::Tensor y = at::randn({33});
  at::Tensor expected = at::erf(x * y);
  CHECK(at::allclose((*first)->run({x, y})[0], expected, 1e-6, 1e-6));
  CHECK(at::allclose((*second)->run({x, y})[0], expected, 1e-6, 1e-6));

  // In the same process with the memory cache on: no file read either.
  CpuCompileOptions memory = options;
  memory.use_memory_cache = true;
  auto third = CpuKernel::compile(group, memory);
  REQUIRE(third);
  CHECK((*third)->compilation().from_memory);
}

// Run in a child process by the next test (hidden: only runs when named): compiles kGroup
// into the cache directory named by DYNVM_KERNEL_CACHE_TEST_DIR.
TEST_CASE("kernel cache: child process populating the cache", "[.kernel_cache_child]") {
  const char* dir = std::getenv("DYNVM_KERNEL_CACHE_TEST_DIR");
  REQUIRE(dir);
  CpuCompileOptions options;
  options.cache_dir = dir;
  auto kernel = CpuKernel::compile(parse(kGroup), options);
  REQUIRE(kernel);
  CHECK((*kernel)->compilation().compiled);
}

TEST_CASE("kernel cache: a kernel another process compiled is loaded, not compiled",
          "[codegen_cpu][kernel_cache]") {
  TempDir dir;
  // This test binary, run again as a separate process.
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string command = "DYNVM_KERNEL_CACHE_TEST_DIR='" + dir.path() + "' '" + self +
                        "' '[.kernel_cache_child]' > /dev/null 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  REQUIRE(std::filesystem::directory_iterator(dir.path()) != std::filesystem::directory_iterator());
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  options.use_memory_cache = false;
  int64_t before = cpu_jit_compilation_count();
  auto kernel = CpuKernel::compile(parse(kGroup), options);
  REQUIRE(kernel);
  CHECK((*kernel)->compilation().from_disk);
  CHECK(!(*kernel)->compilation().compiled);
  CHECK(cpu_jit_compilation_count() == before);
  at::Tensor x = at::randn({16, 33});
  at::Tensor y = at::randn({33});
  CHECK(at::allclose((*kernel)->run({x, y})[0], at::erf(x * y), 1e-6, 1e-6));
}

TEST_CASE("kernel cache: keys follow the kernel and the target", "[codegen_cpu][kernel_cache]") {
  TempDir dir;
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  options.use_memory_cache = false;
  auto a = CpuKernel::compile(parse(kGroup), options);
  std::string other_text = kGroup;
  other_text.replace(other_text.find("aten::erf"), 9, "aten::exp");
  auto b = CpuKernel::compile(parse(other_text), options);
  CpuCompileOptions scalar = options;
  scalar.vector_lanes = 1;
  auto c = CpuKernel::compile(parse(kGroup), scalar);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK((*a)->compilation().cache_key != (*b)->compilation().cache_key);
  CHECK((*a)->compilation().cache_key != (*c)->compilation().cache_key);
  CHECK(content_hash("abc") == content_hash("abc"));
  CHECK(content_hash("abc") != content_hash("abd"));
  CHECK(content_hash("").size() == 32);
}

TEST_CASE("kernel cache: a broken object file is compiled again", "[codegen_cpu][kernel_cache]") {
  TempDir dir;
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  options.use_memory_cache = false;
  auto first = CpuKernel::compile(parse(kGroup), options);
  REQUIRE(first);
  std::string file = dir.path() + "/" + (*first)->compilation().cache_key + ".o";
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "not an object file";
  auto second = CpuKernel::compile(parse(kGroup), options);
  REQUIRE(second);
  CHECK((*second)->compilation().compiled);
  CHECK(std::filesystem::file_size(file) > 100);
}

TEST_CASE("kernel cache: DYNVM_CACHE_DIR picks the directory", "[codegen_cpu][kernel_cache]") {
  const char* saved = std::getenv("DYNVM_CACHE_DIR");
  std::string saved_value = saved ? saved : "";
  ::setenv("DYNVM_CACHE_DIR", "/some/where", 1);
  CHECK(default_kernel_cache_dir() == "/some/where/kernels");
  if (saved) {
    ::setenv("DYNVM_CACHE_DIR", saved_value.c_str(), 1);
  } else {
    ::unsetenv("DYNVM_CACHE_DIR");
  }
}

TEST_CASE("kernel cache: DYNVM_LOGS=kernels prints loop IR and LLVM IR",
          "[codegen_cpu][kernel_cache]") {
  const char* saved = std::getenv("DYNVM_LOGS");
  std::string saved_value = saved ? saved : "";
  ::setenv("DYNVM_LOGS", "graph,kernels", 1);
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  CpuCompileOptions options;
  options.use_disk_cache = false;
  options.use_memory_cache = false;
  auto kernel = CpuKernel::compile(parse(kGroup), options, "logged");
  std::cerr.rdbuf(old);
  if (saved) {
    ::setenv("DYNVM_LOGS", saved_value.c_str(), 1);
  } else {
    ::unsetenv("DYNVM_LOGS");
  }
  REQUIRE(kernel);
  std::string log = captured.str();
  INFO(log);
  CHECK(log.find("[dynvm kernels] logged") != std::string::npos);
  CHECK(log.find("kernel logged(@x: f32[528] in, @y: f32[33] in, @out0: f32[528] out)") !=
        std::string::npos);
  CHECK(log.find("define void @dynvm_kernel_") != std::string::npos);
}

}  // namespace
}  // namespace dynvm::codegen
