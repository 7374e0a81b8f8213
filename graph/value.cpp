// Value's kind names and use bookkeeping.
#include "dynvm/graph/value.h"

#include <algorithm>

#include "dynvm/graph/check.h"
#include "dynvm/graph/node.h"

namespace dynvm::graph {

std::string_view value_kind_name(ValueKind kind) {
  switch (kind) {
#define DYNVM_VALUE_KIND_NAME(e, name) \
  case ValueKind::e:                   \
    return name;
    DYNVM_VALUE_KINDS(DYNVM_VALUE_KIND_NAME)
#undef DYNVM_VALUE_KIND_NAME
  }
  return "?";
}

bool Value::is_removed() const { return producer_ != nullptr && producer_->is_removed(); }

void Value::remove_user(Node* node) {
  auto it = std::find(users_.begin(), users_.end(), node);
  DYNVM_GRAPH_CHECK(it != users_.end(), "use list of a value lost a user");
  users_.erase(it);
}

}  // namespace dynvm::graph
