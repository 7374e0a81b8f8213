// The on-disk kernel cache: paths, a content hash, atomic writes.
#include "dynvm/codegen/kernel_disk_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <system_error>

namespace dynvm::codegen {

std::string default_kernel_cache_dir() {
  const char* dir = std::getenv("DYNVM_CACHE_DIR");
  std::string base;
  if (dir && *dir) {
    base = dir;
  } else {
    const char* home = std::getenv("HOME");
    base = std::string(home && *home ? home : "/tmp") + "/.cache/dynvm";
  }
  return base + "/kernels";
}

std::string content_hash(std::string_view text) {
  uint64_t lanes[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (int lane = 0; lane < 2; ++lane) {
    uint64_t h = lanes[lane];
    for (unsigned char c : text) {
      h ^= c + static_cast<uint64_t>(lane);
      h *= 0x100000001b3ull;
    }
    // Final avalanche, so keys differing in the last byte differ everywhere.
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    lanes[lane] = h;
  }
  char out[33];
  std::snprintf(out, sizeof(out), "%016llx%016llx", static_cast<unsigned long long>(lanes[0]),
                static_cast<unsigned long long>(lanes[1]));
  return out;
}

std::optional<std::string> load_cached_object(const std::string& dir, const std::string& key) {
  std::string path = dir + "/" + key + ".o";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string bytes;
  char chunk[65536];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  if (bytes.empty()) return std::nullopt;
  return bytes;
}

// File I/O through POSIX calls, not iostreams: formatting and file streams depend on the
// C++ library's locale set-up, which some toolchains (a statically linked libstdc++ in a
// Python extension) leave unusable.
bool store_cached_object(const std::string& dir, const std::string& key, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  std::string temp_name = dir + "/." + key + "." + std::to_string(::getpid()) + "." +
                          std::to_string(std::random_device{}()) + ".tmp";
  int fd = ::open(temp_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  bool ok = ::close(fd) == 0 && written == bytes.size();
  if (ok) {
    std::filesystem::rename(temp_name, dir + "/" + key + ".o", ec);
    ok = !ec;
  }
  if (!ok) std::filesystem::remove(temp_name, ec);
  return ok;
}

}  // namespace dynvm::codegen
