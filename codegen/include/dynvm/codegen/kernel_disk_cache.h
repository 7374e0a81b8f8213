// The on-disk kernel cache: object files named by a content hash, shared by processes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dynvm::codegen {

// ${DYNVM_CACHE_DIR:-$HOME/.cache/dynvm}/kernels (created on first store).
std::string default_kernel_cache_dir();

// A 128-bit content hash as 32 hex digits (FNV-1a, two lanes); a cache key, not a MAC.
std::string content_hash(std::string_view text);

// The bytes of <dir>/<key>.o, or nullopt when absent or unreadable.
std::optional<std::string> load_cached_object(const std::string& dir, const std::string& key);

// Writes <dir>/<key>.o atomically (temporary file + rename), so concurrent processes
// never see half a file. Returns false when the directory cannot be written; the kernel
// then just is not cached.
bool store_cached_object(const std::string& dir, const std::string& key, std::string_view bytes);

}  // namespace dynvm::codegen
