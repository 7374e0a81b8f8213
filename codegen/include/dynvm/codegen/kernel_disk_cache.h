// The on-disk kernel cache: object files named by a content hash, shared by processes.
//
// Native code is loaded from it and run, so the cache is private and checked:
// - its directory is created for the user alone (0700); a directory owned by someone else,
//   or writable by group or others, is refused (one warning per process and directory) and
//   kernels are compiled without a disk cache;
// - each entry holds a checksum of its bytes: a truncated or corrupt entry reads as absent
//   and is compiled and written again; an entry that is not a regular file owned by the
//   user and closed to group and others (a symbolic link, say) is refused likewise;
// - entries are raw object bytes (ELF, CUBIN, a tuning choice's text): nothing is
//   unpickled or deserialised beyond the fixed header.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dynvm::codegen {

// ${DYNVM_CACHE_DIR:-$HOME/.cache/dynvm}/kernels; without HOME, the home directory of the
// user's passwd entry; failing that /tmp/dynvm-<uid>/kernels (which the checks above then
// refuse if another user made it first).
std::string default_kernel_cache_dir();

// A 128-bit content hash as 32 hex digits (FNV-1a, two lanes); a cache key, not a MAC.
std::string content_hash(std::string_view text);

// Why `dir` cannot serve as a kernel cache, or "" when it can: it is created (0700, with
// any missing parent) when absent, then must be a directory owned by this process's
// effective user and not writable by group or others. Checked again on every call.
std::string cache_dir_problem(const std::string& dir);
// The same for a directory that should belong to user `owner` (tests name another user).
std::string cache_dir_problem(const std::string& dir, unsigned owner);

// The payload of <dir>/<key>.o, or nullopt when absent, unreadable, corrupt or refused.
std::optional<std::string> load_cached_object(const std::string& dir, const std::string& key);

// Writes <dir>/<key>.o atomically (a private temporary file, then rename), so concurrent
// processes never see half a file and the last writer of a key wins whole. Returns false
// when the directory is refused or cannot be written; the kernel then is not cached.
bool store_cached_object(const std::string& dir, const std::string& key, std::string_view bytes);

}  // namespace dynvm::codegen
