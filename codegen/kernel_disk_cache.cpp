// The on-disk kernel cache: paths, a content hash, atomic writes.
#include "dynvm/codegen/kernel_disk_cache.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
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
  std::ifstream in(dir + "/" + key + ".o", std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return std::nullopt;
  if (bytes.empty()) return std::nullopt;
  return bytes;
}

bool store_cached_object(const std::string& dir, const std::string& key, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  std::ostringstream temp_name;
  temp_name << dir << "/." << key << "." << ::getpid() << "." << std::random_device{}() << ".tmp";
  {
    std::ofstream out(temp_name.str(), std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::filesystem::remove(temp_name.str(), ec);
      return false;
    }
  }
  std::filesystem::rename(temp_name.str(), dir + "/" + key + ".o", ec);
  if (ec) {
    std::filesystem::remove(temp_name.str(), ec);
    return false;
  }
  return true;
}

}  // namespace dynvm::codegen
