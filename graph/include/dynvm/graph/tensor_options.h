// The enumerations ATen takes as tensor options, MemoryFormat and Layout, listed once.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dynvm::graph {

// X(enumerator, name as torch spells it: torch.channels_last)
#define DYNVM_MEMORY_FORMATS(X)      \
  X(Contiguous, "contiguous_format") \
  X(Preserve, "preserve_format")     \
  X(ChannelsLast, "channels_last")   \
  X(ChannelsLast3d, "channels_last_3d")

// X(enumerator, name as torch spells it: torch.strided)
#define DYNVM_LAYOUTS(X)     \
  X(Strided, "strided")      \
  X(SparseCoo, "sparse_coo") \
  X(SparseCsr, "sparse_csr") \
  X(SparseCsc, "sparse_csc") \
  X(SparseBsr, "sparse_bsr") \
  X(SparseBsc, "sparse_bsc") \
  X(Mkldnn, "_mkldnn")

enum class MemoryFormat : uint8_t {
#define DYNVM_MEMORY_FORMAT_ENUM(e, name) e,
  DYNVM_MEMORY_FORMATS(DYNVM_MEMORY_FORMAT_ENUM)
#undef DYNVM_MEMORY_FORMAT_ENUM
};

enum class Layout : uint8_t {
#define DYNVM_LAYOUT_ENUM(e, name) e,
  DYNVM_LAYOUTS(DYNVM_LAYOUT_ENUM)
#undef DYNVM_LAYOUT_ENUM
};

std::string_view memory_format_name(MemoryFormat format);
std::optional<MemoryFormat> parse_memory_format(std::string_view name);
std::string_view layout_name(Layout layout);
std::optional<Layout> parse_layout(std::string_view name);

}  // namespace dynvm::graph
