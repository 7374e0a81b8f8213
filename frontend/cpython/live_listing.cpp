// The JSON listing of a live code object (live_listing.h).
#include "dynvm/frontend/live_listing.h"

#include <utility>

#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/live_code.h"

namespace dynvm::frontend {

Expected<std::string> live_dis_json(PyCodeObject* code) {
  auto raw = raw_code_from_live(code);
  if (!raw) return raw.error();
  auto decoded = decode_recursive(*raw.value());
  if (!decoded) return decoded.error();
  return format_dis_json(decoded.value());
}

}  // namespace dynvm::frontend
