// Names and parsing of MemoryFormat and Layout, generated from their lists.
#include "dynvm/graph/tensor_options.h"

namespace dynvm::graph {

std::string_view memory_format_name(MemoryFormat format) {
  switch (format) {
#define DYNVM_MEMORY_FORMAT_NAME(e, name) \
  case MemoryFormat::e:                   \
    return name;
    DYNVM_MEMORY_FORMATS(DYNVM_MEMORY_FORMAT_NAME)
#undef DYNVM_MEMORY_FORMAT_NAME
  }
  return "?";
}

std::optional<MemoryFormat> parse_memory_format(std::string_view name) {
#define DYNVM_MEMORY_FORMAT_PARSE(e, n) \
  if (name == n) return MemoryFormat::e;
  DYNVM_MEMORY_FORMATS(DYNVM_MEMORY_FORMAT_PARSE)
#undef DYNVM_MEMORY_FORMAT_PARSE
  return std::nullopt;
}

std::string_view layout_name(Layout layout) {
  switch (layout) {
#define DYNVM_LAYOUT_NAME(e, name) \
  case Layout::e:                  \
    return name;
    DYNVM_LAYOUTS(DYNVM_LAYOUT_NAME)
#undef DYNVM_LAYOUT_NAME
  }
  return "?";
}

std::optional<Layout> parse_layout(std::string_view name) {
#define DYNVM_LAYOUT_PARSE(e, n) \
  if (name == n) return Layout::e;
  DYNVM_LAYOUTS(DYNVM_LAYOUT_PARSE)
#undef DYNVM_LAYOUT_PARSE
  return std::nullopt;
}

}  // namespace dynvm::graph
