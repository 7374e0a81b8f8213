// The on-disk kernel cache: paths, a content hash, private directories, checksummed
// entries and atomic writes.
#include "dynvm/codegen/kernel_disk_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>

namespace dynvm::codegen {

namespace {

// An entry: kMagic, the payload's size (8 bytes, little-endian), its checksum (16 bytes),
// then the payload.
constexpr char kMagic[8] = {'D', 'Y', 'N', 'V', 'M', 'K', '1', '\n'};
constexpr size_t kHeaderSize = sizeof(kMagic) + 8 + 16;

// 128 bits over 8-byte words: a check against truncation and damage, not an authenticator
// (the directory's ownership is what keeps other users out).
void checksum(std::string_view bytes, unsigned char out[16]) {
  uint64_t a = 0x9e3779b97f4a7c15ull ^ bytes.size();
  uint64_t b = 0xc2b2ae3d27d4eb4full + bytes.size();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);
    a = (a ^ word) * 0x100000001b3ull;
    a ^= a >> 29;
    b = (b + word) * 0xff51afd7ed558ccdull;
    b ^= b >> 31;
  }
  for (; i < bytes.size(); ++i) {
    a = (a ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
    b = (b + static_cast<unsigned char>(bytes[i])) * 0xff51afd7ed558ccdull;
  }
  a ^= b >> 17;
  b ^= a >> 23;
  for (int k = 0; k < 8; ++k) {
    out[k] = static_cast<unsigned char>(a >> (8 * k));
    out[8 + k] = static_cast<unsigned char>(b >> (8 * k));
  }
}

std::string home_directory() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  // Without HOME (a service, `env -i`): the passwd entry's home.
  const long size_hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::string buffer(size_hint > 0 ? static_cast<size_t>(size_hint) : 16384, '\0');
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr && found->pw_dir != nullptr && found->pw_dir[0] != '\0') {
    return found->pw_dir;
  }
  return "";
}

// mkdir -p with mode 0700 for every directory it makes.
bool make_private_directories(const std::string& dir) {
  if (dir.empty()) return false;
  std::string path;
  size_t at = 0;
  while (at != std::string::npos) {
    size_t next = dir.find('/', at + 1);
    path = dir.substr(0, next);
    at = next;
    if (path.empty() || path == "/") continue;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// cache_dir_problem, answered once per directory per process, with one warning when the
// answer is a refusal.
bool cache_dir_usable(const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, bool> answers;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = answers.find(dir);
  if (it != answers.end()) return it->second;
  std::string problem = cache_dir_problem(dir);
  if (!problem.empty()) {
    std::fprintf(stderr,
                 "dynvm: warning: not using the kernel cache %s: %s; compiling without it\n",
                 dir.c_str(), problem.c_str());
  }
  answers.emplace(dir, problem.empty());
  return problem.empty();
}

bool read_all(int fd, std::string* out) {
  char chunk[65536];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(chunk, static_cast<size_t>(n));
  }
}

bool write_all(int fd, std::string_view bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

// Why a file or directory with `info` is not private to `owner`, or "".
std::string ownership_problem(const struct stat& info, unsigned owner) {
  if (info.st_uid != owner) {
    return "it belongs to user " + std::to_string(info.st_uid) + ", not to this user (" +
           std::to_string(owner) + ")";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return std::string("it is writable by ") +
           ((info.st_mode & S_IWOTH) != 0 ? "others" : "its group") + " (mode " + mode +
           "; chmod go-w it, or choose another directory with DYNVM_CACHE_DIR)";
  }
  return "";
}

}  // namespace

std::string default_kernel_cache_dir() {
  const char* dir = std::getenv("DYNVM_CACHE_DIR");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + "/kernels";
  std::string home = home_directory();
  if (!home.empty()) return home + "/.cache/dynvm/kernels";
  return "/tmp/dynvm-" + std::to_string(::geteuid()) + "/kernels";
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

std::string cache_dir_problem(const std::string& dir) {
  return cache_dir_problem(dir, static_cast<unsigned>(::geteuid()));
}

std::string cache_dir_problem(const std::string& dir, unsigned owner) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    if (errno != ENOENT) return std::string("cannot read it: ") + std::strerror(errno);
    if (!make_private_directories(dir)) {
      return std::string("cannot create it: ") + std::strerror(errno);
    }
    if (::stat(dir.c_str(), &info) != 0) {
      return std::string("cannot read it: ") + std::strerror(errno);
    }
  }
  if (!S_ISDIR(info.st_mode)) return "it is not a directory";
  return ownership_problem(info, owner);
}

std::optional<std::string> load_cached_object(const std::string& dir, const std::string& key) {
  if (!cache_dir_usable(dir)) return std::nullopt;
  std::string path = dir + "/" + key + ".o";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::string bytes;
  // Only a regular file of this user's, never group- or world-writable, is loaded.
  bool ok = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
            ownership_problem(info, static_cast<unsigned>(::geteuid())).empty() &&
            read_all(fd, &bytes);
  ::close(fd);
  if (!ok || bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return std::nullopt;
  }
  uint64_t size = 0;
  for (int k = 0; k < 8; ++k) {
    size |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[sizeof(kMagic) + k])) << (8 * k);
  }
  if (size == 0 || size != bytes.size() - kHeaderSize) return std::nullopt;  // truncated
  std::string_view payload(bytes.data() + kHeaderSize, size);
  unsigned char sum[16];
  checksum(payload, sum);
  if (std::memcmp(sum, bytes.data() + sizeof(kMagic) + 8, sizeof sum) != 0) return std::nullopt;
  return std::string(payload);
}

// File I/O through POSIX calls, not iostreams: formatting and file streams depend on the
// C++ library's locale set-up, which some toolchains (a statically linked libstdc++ in a
// Python extension) leave unusable.
bool store_cached_object(const std::string& dir, const std::string& key, std::string_view bytes) {
  if (bytes.empty() || !cache_dir_usable(dir)) return false;
  char header[kHeaderSize];
  std::memcpy(header, kMagic, sizeof kMagic);
  for (int k = 0; k < 8; ++k) {
    header[sizeof(kMagic) + k] = static_cast<char>(static_cast<uint64_t>(bytes.size()) >> (8 * k));
  }
  unsigned char sum[16];
  checksum(bytes, sum);
  std::memcpy(header + sizeof(kMagic) + 8, sum, sizeof sum);
  std::string temp_name = dir + "/." + key + "." + std::to_string(::getpid()) + "." +
                          std::to_string(std::random_device{}()) + ".tmp";
  int fd = ::open(temp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = write_all(fd, std::string_view(header, kHeaderSize)) && write_all(fd, bytes);
  ok = ::close(fd) == 0 && ok;
  std::string final_name = dir + "/" + key + ".o";
  if (ok) ok = ::rename(temp_name.c_str(), final_name.c_str()) == 0;
  if (!ok) ::unlink(temp_name.c_str());
  return ok;
}

}  // namespace dynvm::codegen
