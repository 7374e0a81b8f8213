// The disk cache of compiled kernels: a second compile loads the object file and runs
// LLVM not at all; keys follow the content; broken files are recompiled; DYNVM_LOGS; the
// cache is private (directories 0700, foreign or shared ones refused), entries are
// checksummed, and concurrent writers of one key leave a whole entry.
#include <ATen/ATen.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

#include "catch.h"
#include "cpu_test_util.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/codegen/kernel_disk_cache.h"
#include "dynvm/codegen/loop_ir_printer.h"

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

// kGroup with its outer (row) size and its inner (column) size replaced.
std::string group_of_size(int64_t rows, int64_t columns) {
  std::string text = kGroup;
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
      at += to.size();
    }
  };
  replace_all("33", "C");
  replace_all("16", std::to_string(rows));
  replace_all("C", std::to_string(columns));
  return text;
}

TEST_CASE("kernel cache: one compiled function serves every extent of the parallel loop",
          "[codegen_cpu][kernel_cache]") {
  TempDir dir;
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  auto first = CpuKernel::compile(parse(group_of_size(16, 33)), options);
  REQUIRE(first);
  int64_t compiled = cpu_jit_compilation_count();
  for (int64_t rows : {2, 7, 300}) {
    auto kernel = CpuKernel::compile(parse(group_of_size(rows, 33)), options);
    REQUIRE(kernel);
    INFO(to_text((*kernel)->loop_kernel()));
    CHECK((*kernel)->parallel_extent() == rows);
    CHECK((*kernel)->compilation().cache_key == (*first)->compilation().cache_key);
    CHECK((*kernel)->compilation().function == (*first)->compilation().function);
    at::Tensor x = at::randn({rows, 33});
    at::Tensor y = at::randn({33});
    CHECK(at::allclose((*kernel)->run({x, y})[0], at::erf(x * y), 1e-6, 1e-6));
  }
  CHECK(cpu_jit_compilation_count() == compiled);
  // The column count is a constant of the code (row loops, vector remainders): another
  // one is another kernel.
  auto wider = CpuKernel::compile(parse(group_of_size(16, 40)), options);
  REQUIRE(wider);
  CHECK((*wider)->compilation().cache_key != (*first)->compilation().cache_key);
}

TEST_CASE("kernel cache: the code text leaves out only the sizes taken at run time",
          "[codegen_cpu][kernel_cache]") {
  auto kernel = CpuKernel::compile(parse(group_of_size(16, 33)), testing::uncached());
  REQUIRE(kernel);
  std::string text = to_text((*kernel)->loop_kernel());
  std::string code = code_text((*kernel)->loop_kernel());
  INFO(text << "\n" << code);
  CHECK(text.find("parallel for %i0 in 0..16") != std::string::npos);
  CHECK(code.find("parallel for %i0 in 0..? {") != std::string::npos);
  CHECK(code.find("[?] in") != std::string::npos);
  CHECK(code.find("[?] out") != std::string::npos);
  CHECK(code.find("16") == std::string::npos);
  CHECK(code.find("33") != std::string::npos);  // strides and inner extents stay
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

// The permission bits of `path` (0 when it cannot be read).
unsigned mode_of(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<unsigned>(info.st_mode & 07777) : 0;
}

// Sets DYNVM_CACHE_DIR for the scope of one test.
class CacheDirVariable {
 public:
  explicit CacheDirVariable(const std::string& value) {
    const char* saved = std::getenv("DYNVM_CACHE_DIR");
    had_ = saved != nullptr;
    if (had_) saved_ = saved;
    ::setenv("DYNVM_CACHE_DIR", value.c_str(), 1);
  }
  ~CacheDirVariable() {
    if (had_) {
      ::setenv("DYNVM_CACHE_DIR", saved_.c_str(), 1);
    } else {
      ::unsetenv("DYNVM_CACHE_DIR");
    }
  }
  CacheDirVariable(const CacheDirVariable&) = delete;
  CacheDirVariable& operator=(const CacheDirVariable&) = delete;

 private:
  bool had_ = false;
  std::string saved_;
};

TEST_CASE("kernel cache: the directories it creates and the entries it writes are private",
          "[codegen_cpu][kernel_cache]") {
  TempDir root;
  CacheDirVariable variable(root.path() + "/made/here");
  std::string dir = default_kernel_cache_dir();
  CHECK(dir == root.path() + "/made/here/kernels");
  mode_t old_mask = ::umask(0);  // even with a permissive umask
  bool stored = store_cached_object(dir, "k1", "payload bytes");
  ::umask(old_mask);
  REQUIRE(stored);
  CHECK(mode_of(root.path() + "/made") == 0700);
  CHECK(mode_of(root.path() + "/made/here") == 0700);
  CHECK(mode_of(dir) == 0700);
  CHECK(mode_of(dir + "/k1.o") == 0600);
  CHECK(load_cached_object(dir, "k1") == std::optional<std::string>("payload bytes"));
  CHECK(cache_dir_problem(dir).empty());
}

TEST_CASE("kernel cache: a directory writable by group or others is refused",
          "[codegen_cpu][kernel_cache]") {
  TempDir root;
  std::string good = root.path() + "/good";
  REQUIRE(store_cached_object(good, "entry", "object bytes"));
  for (mode_t mode : {mode_t{0777}, mode_t{0770}, mode_t{0722}}) {
    std::string shared = root.path() + "/shared" + std::to_string(mode);
    REQUIRE(::mkdir(shared.c_str(), 0700) == 0);
    std::filesystem::copy_file(good + "/entry.o", shared + "/entry.o");
    REQUIRE(::chmod(shared.c_str(), mode) == 0);
    std::string problem = cache_dir_problem(shared);
    INFO(problem);
    CHECK(problem.find((mode & S_IWOTH) != 0 ? "writable by others" : "writable by its group") !=
          std::string::npos);
    // A valid entry there is not loaded, nothing is written, and a compile goes on without.
    CHECK(!load_cached_object(shared, "entry"));
    CHECK(!store_cached_object(shared, "other", "bytes"));
    CHECK(!std::filesystem::exists(shared + "/other.o"));
    CpuCompileOptions options;
    options.cache_dir = shared;
    options.use_memory_cache = false;
    auto kernel = CpuKernel::compile(parse(kGroup), options);
    REQUIRE(kernel);
    CHECK((*kernel)->compilation().compiled);
    CHECK(!(*kernel)->compilation().from_disk);
  }
  CHECK(load_cached_object(good, "entry") == std::optional<std::string>("object bytes"));
}

TEST_CASE("kernel cache: a directory of another user, or an entry not private, is refused",
          "[codegen_cpu][kernel_cache]") {
  TempDir root;
  std::string dir = root.path() + "/kernels";
  REQUIRE(store_cached_object(dir, "entry", "object bytes"));
  // The directory as another user would find it (no root needed to ask).
  const unsigned other = static_cast<unsigned>(::geteuid()) + 1;
  std::string problem = cache_dir_problem(dir, other);
  INFO(problem);
  CHECK(problem.find("belongs to user " + std::to_string(::geteuid())) != std::string::npos);
  CHECK(cache_dir_problem(dir).empty());
  // Entries: one group- or world-writable, a symbolic link, a directory: none is loaded.
  REQUIRE(load_cached_object(dir, "entry"));
  REQUIRE(::chmod((dir + "/entry.o").c_str(), 0666) == 0);
  CHECK(!load_cached_object(dir, "entry"));
  REQUIRE(::chmod((dir + "/entry.o").c_str(), 0620) == 0);
  CHECK(!load_cached_object(dir, "entry"));
  REQUIRE(::chmod((dir + "/entry.o").c_str(), 0600) == 0);
  CHECK(load_cached_object(dir, "entry"));
  std::filesystem::create_symlink(dir + "/entry.o", dir + "/linked.o");
  CHECK(!load_cached_object(dir, "linked"));
  std::filesystem::create_directory(dir + "/folder.o");
  CHECK(!load_cached_object(dir, "folder"));
  // A cache directory that is a file.
  CHECK(cache_dir_problem(dir + "/entry.o") == "it is not a directory");
}

TEST_CASE("kernel cache: a truncated or damaged entry reads as absent",
          "[codegen_cpu][kernel_cache]") {
  TempDir root;
  std::string dir = root.path() + "/kernels";
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 + 3);
  REQUIRE(store_cached_object(dir, "entry", payload));
  std::string file = dir + "/entry.o";
  REQUIRE(load_cached_object(dir, "entry") == std::optional<std::string>(payload));
  auto whole = std::filesystem::file_size(file);
  auto rewrite = [&](const std::function<void(std::string&)>& damage) {
    REQUIRE(store_cached_object(dir, "entry", payload));
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    damage(bytes);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  };
  rewrite([](std::string& b) { b.resize(b.size() / 2); });  // truncated
  CHECK(!load_cached_object(dir, "entry"));
  rewrite([](std::string& b) { b[b.size() - 10] ^= 0x20; });  // one flipped bit in the payload
  CHECK(!load_cached_object(dir, "entry"));
  rewrite([](std::string& b) { b[2] = 'X'; });  // not an entry (an older format)
  CHECK(!load_cached_object(dir, "entry"));
  rewrite([](std::string& b) { b.clear(); });
  CHECK(!load_cached_object(dir, "entry"));
  rewrite([](std::string&) {});
  CHECK(std::filesystem::file_size(file) == whole);
  CHECK(load_cached_object(dir, "entry") == std::optional<std::string>(payload));
}

TEST_CASE("kernel cache: processes writing one key leave a whole entry",
          "[codegen_cpu][kernel_cache]") {
  TempDir root;
  std::string dir = root.path() + "/kernels";
  REQUIRE(cache_dir_problem(dir).empty());
  const std::string payloads[2] = {std::string(300000, 'a'), std::string(200000, 'b')};
  pid_t children[2];
  for (int c = 0; c < 2; ++c) {
    children[c] = ::fork();
    REQUIRE(children[c] >= 0);
    if (children[c] == 0) {
      bool ok = true;
      for (int i = 0; i < 100; ++i) ok = store_cached_object(dir, "shared", payloads[c]) && ok;
      ::_exit(ok ? 0 : 1);
    }
  }
  int loads = 0;
  int torn = 0;
  for (int i = 0; i < 400; ++i) {
    if (std::optional<std::string> got = load_cached_object(dir, "shared")) {
      ++loads;
      if (*got != payloads[0] && *got != payloads[1]) ++torn;
    }
  }
  for (pid_t child : children) {
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  CHECK(torn == 0);
  std::optional<std::string> last = load_cached_object(dir, "shared");
  REQUIRE(last);
  CHECK((*last == payloads[0] || *last == payloads[1]));
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    CHECK(entry.path().filename() == "shared.o");
  }
  CHECK(files == 1);
  INFO("loads that found an entry while the writers ran: " << loads);
}

}  // namespace
}  // namespace dynvm::codegen
